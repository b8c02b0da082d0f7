"""The contract every device adapter fulfils, and the handle the runner times with.

Only modules in this package know how CUDA, MPS, XPU and the CPU differ. Everything else asks a
:class:`Device` to synchronise, to reset and read its peak memory, and to describe itself.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Availability:
    """Whether a device kind can be used here and, when not, why and how to fix it."""

    kind: str
    available: bool
    count: int = 0
    reason: str = ""
    fix: str = ""
    built: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "available": self.available,
            "count": self.count,
            "built": self.built,
            "reason": self.reason,
            "fix": self.fix,
        }


class DeviceAdapter(ABC):
    """One kind of device (cpu, cuda, mps, xpu, or a generic torch.accelerator back end)."""

    kind: str = ""
    #: True when kernels run asynchronously, so timing needs synchronisation.
    is_async: bool = True
    #: Where the peak-memory figure comes from, in words shown beside it.
    memory_source: str = "device allocator"
    #: True when the figure can be below the true peak (sampled, not counted by the allocator).
    memory_is_lower_bound: bool = False
    #: Whether page-locked host batches speed up host-to-device copies (CUDA, XPU). Elsewhere
    #: pinning only costs: on MPS, DataLoader warns on every iterator that it is unsupported.
    pin_memory: bool = False
    #: The torch.distributed backend for this kind's tensors ("" = torch's default map decides).
    distributed_backend: str = ""
    #: Energy sources (names known to accelbench.measure.trackers.energy), in order of preference.
    energy_sources: tuple[str, ...] = ()
    #: Whether timing events may be recorded around every step of the timed loop: a record that
    #: neither commits nor waits, and two events recorded back to back read as zero time apart,
    #: never as an error. Where not, the loop times input from the host (an upper bound).
    step_events_safe: bool = True
    #: What torch.compile's graph modes (``reduce-overhead``, ``max-autotune``) capture here:
    #: inductor records CUDA graphs on CUDA devices (HIP graphs on ROCm) and nowhere else, where
    #: those modes compile without them ("" = none).
    graph_capture: str = ""

    @abstractmethod
    def availability(self) -> Availability:
        """Is this kind usable in this process, and if not, why not and what to do."""

    @abstractmethod
    def synchronize(self, index: int) -> None:
        """Wait until all work queued on device ``index`` has finished."""

    @abstractmethod
    def reset_peak_memory(self, index: int) -> bool | None:
        """Start a new peak-memory measurement: the peak counts from what is live now. False
        where this device's counter cannot be reset (the peak then keeps counting from before:
        a figure read after it holds what came before too); True or None where it was."""

    @abstractmethod
    def peak_memory_bytes(self, index: int) -> int | None:
        """Peak memory since the last reset, or None when it cannot be read."""

    @abstractmethod
    def info(self, index: int) -> dict[str, Any]:
        """Name, memory (total, free where readable) and compute facts of device ``index``."""

    def sensors(self, index: int) -> dict[str, Any]:
        """Clock and temperature of the device where readable (for drift diagnosis); {} if not."""
        return {}

    def make_current(self, index: int) -> None:
        """Make ``index`` this process's current device, so that work torch places on "the
        current device" (pinned-memory threads, stray allocations, collectives) goes there too
        and not to device 0. Nothing to do for a kind with a single device."""
        return None

    def current(self, index: int) -> AbstractContextManager[None]:
        """``index`` is this process's current device inside the block and the previous one is
        again after it (work that never names its device, such as a timing event's record,
        goes to the current one). Nothing to do for a kind with a single device."""
        return contextlib.nullcontext()

    def torch_device(self, index: int) -> str:
        return f"{self.kind}:{index}"

    # Precision switches of this kind's own, beyond torch's device-wide ones (the fp32 matmul
    # precision, cuDNN's and the per-op fp32_precision switches, which devices/numerics.py sets).
    def allow_tf32(self, allowed: bool) -> Callable[[], None]:
        """Allow or forbid TF32 in this kind's fp32 products and convolutions through a switch of
        its own; returns what puts the switch back. Nothing to do for a kind without one."""
        return _nothing_to_put_back

    def tf32_flags(self) -> dict[str, bool]:
        """This kind's own TF32 switches in force now, by their names in a result's
        ``backend_flags``; {} for a kind without one."""
        return {}


def _nothing_to_put_back() -> None:
    return None


@dataclass(frozen=True)
class Device:
    """One selected device: an adapter and an index. This is what a Case runs on."""

    adapter: DeviceAdapter = field(compare=False, repr=False)
    kind: str
    index: int = 0

    @property
    def name(self) -> str:
        """The user-facing name: ``cpu``, ``cuda:0``, ``mps:0`` ..."""
        return "cpu" if self.kind == "cpu" else f"{self.kind}:{self.index}"

    @property
    def torch_device(self) -> str:
        return self.adapter.torch_device(self.index)

    @property
    def is_async(self) -> bool:
        return self.adapter.is_async

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    @property
    def memory_source(self) -> str:
        return self.adapter.memory_source

    @property
    def memory_is_lower_bound(self) -> bool:
        return self.adapter.memory_is_lower_bound

    @property
    def pin_memory(self) -> bool:
        return self.adapter.pin_memory

    @property
    def step_events_safe(self) -> bool:
        return self.adapter.step_events_safe

    @property
    def graph_capture(self) -> str:
        return self.adapter.graph_capture

    def make_current(self) -> None:
        self.adapter.make_current(self.index)

    def current(self) -> AbstractContextManager[None]:
        """This device is current inside the block; the one before it is current after."""
        return self.adapter.current(self.index)

    def synchronize(self) -> None:
        self.adapter.synchronize(self.index)

    def reset_peak_memory(self) -> bool | None:
        """False where the counter could not be reset (see DeviceAdapter.reset_peak_memory)."""
        return self.adapter.reset_peak_memory(self.index)

    def peak_memory_bytes(self) -> int | None:
        return self.adapter.peak_memory_bytes(self.index)

    def info(self) -> dict[str, Any]:
        return self.adapter.info(self.index)

    def sensors(self) -> dict[str, Any]:
        try:
            return self.adapter.sensors(self.index)
        except Exception as error:  # a sensor that cannot be read is a fact, not a failure
            return {"error": f"{type(error).__name__}: {error}"}


def _accelerator_for(torch_module: Any, kind: str) -> Any:
    """``torch.accelerator`` when it speaks for ``kind`` (torch >= 2.6), else None."""
    accelerator = getattr(torch_module, "accelerator", None)
    if accelerator is None or not hasattr(accelerator, "current_accelerator"):
        return None
    try:
        current = accelerator.current_accelerator()
    except RuntimeError:
        return None
    return accelerator if current is not None and current.type == kind else None


def set_current_device(torch_module: Any, kind: str, index: int) -> None:
    """Make ``kind:index`` current: through the device-neutral ``torch.accelerator`` when it
    speaks for ``kind`` (torch >= 2.7 names it set_device_index), else ``torch.<kind>.set_device``."""
    accelerator = _accelerator_for(torch_module, kind)
    setter = getattr(accelerator, "set_device_index", None) or getattr(accelerator, "set_device_idx", None)
    if setter is not None:
        setter(index)
    else:
        getattr(torch_module, kind).set_device(index)


def _current_index(torch_module: Any, kind: str) -> int:
    accelerator = _accelerator_for(torch_module, kind)
    getter = getattr(accelerator, "current_device_index", None) \
        or getattr(accelerator, "current_device_idx", None)
    return int(getter() if getter is not None else getattr(torch_module, kind).current_device())


@contextlib.contextmanager
def current_device(torch_module: Any, kind: str, index: int) -> Iterator[None]:
    """``kind:index`` is current inside the block, the previous device after it.

    Through torch's own context managers where they exist: ``torch.accelerator.device_index``
    (torch >= 2.8) when it speaks for ``kind``, else ``torch.<kind>.device`` (CUDA, XPU). Both
    restore with torch's "maybe exchange", which leaves a previous device that has no context
    without one (a plain set_device would create a context on GPU 0 in a cuda:1 worker). Other
    back ends on older torch: read the index, set it, and set it back."""
    accelerator = _accelerator_for(torch_module, kind)
    manager = getattr(accelerator, "device_index", None) \
        or getattr(getattr(torch_module, kind, None), "device", None)
    if manager is not None:
        with manager(index):
            yield
        return
    previous = _current_index(torch_module, kind)
    set_current_device(torch_module, kind, index)
    try:
        yield
    finally:
        set_current_device(torch_module, kind, previous)

