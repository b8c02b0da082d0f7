"""``ampere``: an NVIDIA GPU of compute capability 8.0 (two of them, for ``scale``) whose fp32
products and convolutions are rounded to TF32 whenever the flags in force allow it (tf32.py), as
on an A100. Everything else computes as the CPU does.

cuDNN's autotuner: with ``torch.backends.cudnn.benchmark`` on, the first convolution of each
configuration (shapes, dtypes, the TF32 switches: the key of ATen's benchmark cache,
aten/src/ATen/native/cudnn/ConvShared.h ``ConvolutionParams``) tries cuDNN's algorithms, each
with a workspace of its own, freed when the search ends: the allocator's peak holds
``ACCELBENCH_PERSONALITY_CUDNN_WORKSPACE_MB`` (default 256) above what is live then, once per
configuration and process (an H200 saw 4.7-5.2 GiB of it on ResNet-50 at batch 128).

Observable: each rounded op is written to the journal with the flags and the accelbench frames
that called it; the exit summary counts the candidate ops that ran exact.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from accelbench_personalities import cuda_api, device_api, emulated, int4pack, journal, placement, tf32

#: Not a real product name, so selftest judges it by physical bounds, not by an A100's figures.
NAME = "Emulated Ampere GPU (accelbench test personality, sm_80)"
TOTAL_MEMORY = 40 * 2**30


class AmpereRules(emulated.Rules):
    device_type = "cuda"
    device_count = 2
    #: Seconds a synchronisation (or a read to the host) costs: none on this one.
    sync_s = 0.0

    def __init__(self) -> None:
        self.autotune_workspace = int(float(os.environ.get(
            "ACCELBENCH_PERSONALITY_CUDNN_WORKSPACE_MB", 256)) * 2**20)
        #: The configurations cuDNN's autotuner has searched in this process.
        self.tuned: set[tuple[Any, ...]] = set()

    def before_op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  device: torch.device) -> tuple[tuple[Any, ...], dict[str, Any]]:
        kind = tf32.kind_of(func)
        if kind is None:
            return args, kwargs
        if kind == "conv":
            self.autotune(func, args)
        rounded = tf32.rounded_args(func, args)
        name = func.overloadpacket.__name__
        if rounded is None:
            journal.count("exact", name)
            return args, kwargs
        journal.count("rounded", name)
        journal.write("rounded", op=str(func), kind=kind, flags=tf32.flags_now(),
                      where=journal.accelbench_frames())
        return rounded, kwargs

    def implementation(self, func: Any) -> Any:
        # tinygemm, the CUDA int4 product, takes bfloat16 activations only.
        return int4pack.kernels(torch.bfloat16).get(func, func)

    def host_sync(self, device: torch.device) -> None:
        if self.sync_s:
            time.sleep(self.sync_s)

    def autotune(self, func: Any, args: tuple[Any, ...]) -> None:
        """The search cudnn.benchmark makes the first time a configuration is met."""
        if not (torch.backends.cudnn.benchmark and torch._C._get_cudnn_enabled()):
            return
        shapes = tuple((tuple(a.shape), a.dtype) for a in args if isinstance(a, torch.Tensor))
        key = (func.overloadpacket.__name__, shapes, tuple(sorted(tf32.flags_now().items())))
        if key in self.tuned:
            return
        self.tuned.add(key)
        emulated.memory.transient(self.autotune_workspace)
        journal.count("autotuned", func.overloadpacket.__name__)


def install(rules: AmpereRules | None = None, name: str = NAME) -> AmpereRules:
    rules = rules or AmpereRules()
    rules.device_count = int(os.environ.get("ACCELBENCH_PERSONALITY_GPUS", rules.device_count))
    placement.install(rules, pinning=True)
    cuda_api.patch_cuda(os.environ.get("ACCELBENCH_PERSONALITY_DEVICE_NAME", name), 8, 0,
                        TOTAL_MEMORY, 108)
    return rules


class SlowSyncRules(AmpereRules):
    """``slow-sync``: the Ampere GPU behind a slow driver: every synchronisation and every read
    to the host costs ``ACCELBENCH_PERSONALITY_SYNC_MS`` (default 5 ms), and ``time.perf_counter``
    / ``time.monotonic`` tick every ``ACCELBENCH_PERSONALITY_TICK_MS`` (default 1 ms)."""

    sync_s = 0.005


def install_slow_sync() -> AmpereRules:
    rules = SlowSyncRules()
    rules.sync_s = float(os.environ.get("ACCELBENCH_PERSONALITY_SYNC_MS", 5)) / 1000
    installed = install(rules, name="Emulated slow-sync GPU (accelbench test personality, sm_80)")
    device_api.coarse(float(os.environ.get("ACCELBENCH_PERSONALITY_TICK_MS", 1)) / 1000)
    return installed
