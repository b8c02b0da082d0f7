"""``mps`` / ``mps-nopeak``: Apple silicon's GPU through torch's MPS back end, as torch 2.14.1
drives it (checked against aten/src/ATen/mps/MPSEvent.mm, MPSGuardImpl.mm, MPSFallback.mm and
EmptyTensor.cpp):

- **no float64**: creating or converting a float64 tensor on the device raises
  ``TypeError: Cannot convert a MPS Tensor to float64 dtype ...`` (torch's
  MPS_ERROR_DOUBLE_NOT_SUPPORTED, checked when MPS allocates); ``.cpu()`` first is fine.
- **timing events** (``torch.Event(device="mps", enable_timing=True)``): every ``record`` commits
  the command buffer (``recordEvent(id, /*syncEvent*/ true)``), counted in the journal. An
  event's time is stamped when the GPU signals it, after the work queued before it. Products
  and convolutions keep this GPU busy until the host next waits for it (a device-bound step):
  two events recorded with no device work between them while it is busy (around the input
  fetch of a device-bound step) signal together, and ``elapsed_time`` raises ``End event N was
  not recorded after start event M`` (``TORCH_CHECK(end_time > start_time)``); on an idle
  device (after a synchronisation, or only copies since) they read in order. A recorded-again
  (recycled) event keeps its previous completion time until its new signal is delivered:
  ``elapsedTime`` waits only for the *end* event's notification, so the first reading that
  uses a recycled event as its start gets the previous window's timestamp (an inflated gap).
- **memory**: ``torch.mps.current_allocated_memory`` (live tensors); ``mps`` also has
  ``torch.accelerator``'s statistics with a true peak, ``mps-nopeak`` has none (torch before
  the accelerator memory API), so accelbench must sample and label a lower bound.
- **CPU fallback**: ops without an MPS kernel (ACCELBENCH_PERSONALITY_MPS_MISSING, default
  linalg_eig, grid_sampler_3d, _ctc_loss: a model, not a claim about 2.14's kernels) raise
  NotImplementedError with torch's words, or with ``PYTORCH_ENABLE_MPS_FALLBACK=1`` run on the
  CPU after a warning issued once per process for all ops together (one TORCH_WARN_ONCE call
  site), unless ``torch.set_warn_always(True)``. torch's always-CPU ops (linalg_svd, col2im,
  embedding_renorm_, upsample_nearest3d) warn the same way without the variable.
- **platform**: accelbench's MpsAdapter sees an arm64 Mac on macOS 14.5.
"""

from __future__ import annotations

import itertools
import os
import warnings
from typing import Any

import torch

from accelbench_personalities import device_api, emulated, int4pack, journal, placement
from accelbench_personalities.patches import replace

MPS_FLOAT64_ERROR = ("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't "
                     "support float64. Please use float32 instead.")
MISSING_ENV = "ACCELBENCH_PERSONALITY_MPS_MISSING"
DEFAULT_MISSING = ("linalg_eig", "grid_sampler_3d", "_ctc_loss")
ALWAYS_CPU = ("embedding_renorm_", "linalg_svd", "col2im", "upsample_nearest3d")
MACOS = "14.5"
#: Work the GPU is still busy with when the host moves on (the step's products and convolutions;
#: copies and elementwise ops are taken to finish at once).
DEVICE_BOUND_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "_addmm_activation",
                              "convolution", "convolution_backward",
                              "_scaled_dot_product_flash_attention_for_cpu"})
#: A Mac with 16 GiB of unified memory; the GPU may use about 70% of it.
TOTAL_MEMORY = 16 * 2**30
_ids = itertools.count(1)


class MpsEvent:
    """A timing event as MPS's behave (see the module's docstring)."""

    def __init__(self, device: torch.device, enable_timing: bool = False) -> None:
        self.device = device
        self.enable_timing = enable_timing
        self.event_id = next(_ids)
        self.completed_ns = 0
        self.stale_ns = 0
        self.signals = 0
        #: Device ops done when it was recorded: no op since the last record = back to back.
        self.device_ops = -1

    def record(self, stream: Any = None) -> None:
        self.device = device_api.recording_device(self.device, stream)
        journal.write("event_record", kind="MpsEvent", commit=True, device=str(self.device),
                      where=journal.accelbench_frames())
        journal.count("commit", "event_record")
        if self.signals:
            self.stale_ns = self.completed_ns  # the new signal is delivered late
        self.signals += 1
        self.completed_ns = emulated.completion_ns()

    def query(self) -> bool:
        return self.signals > 0

    def synchronize(self) -> None:
        emulated.host_waited(self.device)
        self.stale_ns = 0  # waited for its own notification

    def wait(self, stream: Any = None) -> None:
        return None

    def elapsed_time(self, end_event: MpsEvent) -> float:
        start = self.stale_ns or self.completed_ns
        self.stale_ns = 0
        end = end_event.completed_ns
        if not (self.enable_timing and end_event.enable_timing) or start <= 0 or end <= 0:
            raise RuntimeError("Events were not created with argument 'enable_timing=True'")
        if not end > start:
            raise RuntimeError(f"End event {end_event.event_id} was not recorded after start event "
                               f"{self.event_id}")
        return (end - start) * 1e-6


class MpsRules(emulated.Rules):
    device_type = "mps"
    device_count = 1

    def __init__(self) -> None:
        listed = os.environ.get(MISSING_ENV)
        self.missing = frozenset(listed.split(",") if listed is not None else DEFAULT_MISSING)
        # torch reads the variable once, when its MPS library loads.
        self.fallback = os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK", "0") not in ("", "0")
        self.warned = False

    def before_op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  device: torch.device) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if kwargs.get("dtype") == torch.float64:
            raise TypeError(MPS_FLOAT64_ERROR)
        name = func.overloadpacket.__name__
        if name == "_weight_int8pack_mm" and not self._int8_fits(args):
            raise RuntimeError("Expected N % 32 == 0 && K % 32 == 0 to be true, but got false.")
        if name in self.missing or name in ALWAYS_CPU:
            schema = func._schema
            operator = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
            if name in self.missing and not self.fallback:
                raise NotImplementedError(
                    f"The operator '{operator}' is not currently implemented for the MPS device. If "
                    "you want this op to be considered for addition please comment on "
                    "https://github.com/pytorch/pytorch/issues/141287 and mention use-case, that "
                    "resulted in missing op as well as commit hash 5c48869. As a temporary fix, you "
                    "can set the environment variable `PYTORCH_ENABLE_MPS_FALLBACK=1` to use the "
                    "CPU as a fallback for this op. WARNING: this will be slower than running "
                    "natively on MPS.")
            self._warn_once(operator)
        return args, kwargs

    @staticmethod
    def _int8_fits(args: tuple[Any, ...]) -> bool:
        """``_weight_int8pack_mm_mps`` (Quantized.mm): ``TORCH_CHECK(N % 32 == 0 && K % 32 == 0)``."""
        weight = args[1]
        return weight.shape[0] % 32 == 0 and weight.shape[1] % 32 == 0

    def implementation(self, func: Any) -> Any:
        return int4pack.kernels(None).get(func, func)

    def _warn_once(self, operator: str) -> None:
        if self.warned and not torch.is_warn_always_enabled():
            return
        self.warned = True
        journal.write("fallback_warning", op=operator)
        warnings.warn(f"The operator '{operator}' is not currently supported on the MPS backend and "
                      "will fall back to run on the CPU. This may have performance implications.",
                      UserWarning, stacklevel=3)

    def check_outputs(self, func: Any, outputs: list[torch.Tensor], device: torch.device) -> None:
        if any(t.dtype == torch.float64 for t in outputs):
            raise TypeError(MPS_FLOAT64_ERROR)

    def keeps_busy(self, func: Any) -> bool:
        return func.overloadpacket.__name__ in DEVICE_BOUND_OPS

    def host_sync(self, device: torch.device) -> None:
        journal.count("sync", "host")


def _patch_mps(peak: bool) -> None:
    mps = torch.mps
    values: dict[str, Any] = {
        "synchronize": lambda: device_api.synchronize(None),
        "device_count": lambda: 1,
        "is_available": lambda: True,
        "current_allocated_memory": lambda: emulated.memory.allocated,
        "driver_allocated_memory": lambda: emulated.memory.allocated,
        "recommended_max_memory": lambda: int(TOTAL_MEMORY * 0.7),
        "empty_cache": lambda: None,
        "manual_seed": lambda seed: None,
        "seed": lambda: None,
        "set_per_process_memory_fraction": lambda fraction: None,
    }
    for name, value in values.items():
        replace(mps, name, value)
    def event(enable_timing: bool = False) -> MpsEvent:
        return MpsEvent(torch.device("mps", 0), enable_timing=enable_timing)

    replace(torch.mps.event, "Event", event)
    replace(mps, "Event", event)
    backends = torch.backends.mps
    version = tuple(int(part) for part in MACOS.split("."))
    for name, value in (("is_built", lambda: True), ("is_available", lambda: True),
                        ("is_macos_or_newer", lambda major, minor: version >= (major, minor))):
        replace(backends, name, value)
    device_api.patch_accelerator(MpsEvent, TOTAL_MEMORY, memory_api=peak)
    device_api.patch_event(MpsEvent)


def _patch_mac_facts() -> None:
    """accelbench's MpsAdapter asks the platform whether this is an arm64 Mac."""
    from accelbench.devices import mps as adapter

    facts = adapter.MacFacts("Darwin", "arm64", MACOS, rosetta=False)
    replace(adapter, "current_mac_facts", lambda: facts)


def install(peak: bool) -> MpsRules:
    rules = MpsRules()
    placement.install(rules, pinning=False)
    _patch_mps(peak)
    _patch_mac_facts()
    return rules
