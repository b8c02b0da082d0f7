"""What a reused worker process puts back before each case, so the case begins as it would in a
fresh process: nothing a case changes in the process reaches the next one.

Taken once, when the worker starts (:meth:`ProcessState.now`), and applied before every case
(:meth:`ProcessState.renew`):

- torch's numeric switches (the TF32 ones, cuDNN's benchmark and determinism, deterministic
  algorithms, the reduced-precision reductions: ``devices.numerics.switches_as_now``), the
  default dtype, grad mode, anomaly detection and the thread count;
- the environment variables (a case's compile-cache folders are its own: engine/cold_start.py);
- the random generators: torch's on every device, Python's and NumPy's, seeded afresh from the
  system's entropy, as a fresh process's are (a case that seeds them leaks no seed);
- memory: what the last case left is collected and the allocators' free memory handed back
  (glibc's ``malloc_trim``, an accelerator's cached blocks), so the case's peak, which its memory
  tracker counts from the case's start (measure/trackers/region.py), starts from a process that holds
  little more than a fresh one.

The compile caches are each case's own already (engine/cold_start.py clears dynamo's and
inductor's in-memory caches around a compiled case). What cannot be put back (the device's
context, kernels already loaded, imported modules) is why a reused worker's later cases are
marked warm (``start.cases_before``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch

from accelbench.devices.numerics import switches_as_now


def _release_host_memory() -> None:
    """Hand the C allocator's free pages back to the system (glibc keeps them otherwise, and the
    next case's peak resident memory would start from them)."""
    name = ctypes.util.find_library("c")
    with contextlib.suppress(OSError, AttributeError, TypeError):
        ctypes.CDLL(name).malloc_trim(0)


def _release_device_memory() -> None:
    """An accelerator's cached free blocks, through torch's device-generic API (torch.accelerator:
    CUDA, MPS, XPU alike); nothing on a CPU-only machine."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or not accelerator.is_available():
        return
    with contextlib.suppress(Exception):  # an older torch without the call
        accelerator.empty_cache()


@dataclass
class ProcessState:
    """The process-wide state a case may change, as the worker had it before its first case."""

    put_switches_back: Callable[[], None]
    default_dtype: torch.dtype
    grad_enabled: bool
    anomaly: tuple[bool, bool]
    threads: int
    environment: dict[str, str]

    @classmethod
    def now(cls) -> ProcessState:
        return cls(switches_as_now(), torch.get_default_dtype(), torch.is_grad_enabled(),
                   (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
                   torch.get_num_threads(), dict(os.environ))

    def renew(self) -> None:
        """Before a case: everything above as it was, fresh generators, memory released."""
        self.put_switches_back()
        torch.set_default_dtype(self.default_dtype)
        torch.set_grad_enabled(self.grad_enabled)
        torch.set_anomaly_enabled(*self.anomaly)
        torch.set_num_threads(self.threads)
        os.environ.clear()
        os.environ.update(self.environment)
        torch.seed()  # every device's generator, from the system's entropy
        random.seed()
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            numpy.random.seed()
        gc.collect()
        _release_host_memory()
        _release_device_memory()
