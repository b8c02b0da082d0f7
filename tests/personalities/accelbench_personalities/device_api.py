"""The Python API every emulated device shares: streams, timing events, synchronisation, memory
counters and ``torch.accelerator``. A personality picks the event kind and patches its own
``torch.<kind>`` module on top (cuda_api.py, mps.py).

The device computes on the CPU as ops are dispatched; an event completes when the device reaches
it (emulated.completion_ns), and a synchronisation costs what the personality says.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import torch

from accelbench_personalities import emulated, journal
from accelbench_personalities.patches import remove, replace

_ids = itertools.count(1)


class CudaLikeEvent:
    """A timing event as CUDA's behave: it completes when the device reaches it (at once here),
    ``elapsed_time`` is the time between the two completions, back-to-back events read ~0. The
    object holds no CUDA event until its first ``record()`` creates one (``cudaEventCreate``:
    aten/src/ATen/cuda/CUDAEvent.h, "constructed lazily when first recorded"; torch/cuda/streams.py,
    "lazily initialized when the event is first recorded"): journalled as ``event_create``. A
    second record replaces the first (``cudaEventRecord``)."""

    def __init__(self, device: torch.device, enable_timing: bool = False) -> None:
        self.device = device
        self.enable_timing = enable_timing
        self.event_id = next(_ids)
        self.completed_ns: int | None = None
        self.created = False

    def record(self, stream: Any = None) -> None:
        self.device = recording_device(self.device, stream)
        where = journal.accelbench_frames()
        if not self.created:
            self.created = True
            journal.write("event_create", kind=type(self).__name__, device=str(self.device), where=where)
        journal.write("event_record", kind=type(self).__name__, device=str(self.device), where=where)
        self.completed_ns = emulated.completion_ns()

    def query(self) -> bool:
        return self.completed_ns is not None

    def synchronize(self) -> None:
        emulated.host_waited(self.device)

    def wait(self, stream: Any = None) -> None:
        return None

    def elapsed_time(self, end_event: CudaLikeEvent) -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.completed_ns is None or end_event.completed_ns is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event.completed_ns - self.completed_ns) / 1e6


class FakeStream:
    """The device's one stream: work on it is done by the time the host sees it."""

    def __init__(self, device: torch.device, make_event: Callable[..., Any]) -> None:
        self.device = device
        self.device_index = device.index
        self.device_type = device.type
        self._make_event = make_event

    def synchronize(self) -> None:
        synchronize(self.device)

    def query(self) -> bool:
        return True

    def wait_event(self, event: Any) -> None:
        return None

    def wait_stream(self, stream: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> Any:
        event = event or self._make_event(self.device, enable_timing=False)
        event.record(self)
        return event

    def is_capturing(self) -> bool:
        return False

    def __enter__(self) -> FakeStream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeStream) and other.device == self.device

    def __hash__(self) -> int:
        return hash(("stream", self.device))


def device_of(device: Any = None) -> torch.device:
    """``None``, an index, a name or a device -> the emulated ``torch.device`` it means."""
    kind = emulated.state.rules.device_type
    if device is None:
        return torch.device(kind, emulated.state.current_index)
    if isinstance(device, int):
        return torch.device(kind, device)
    return emulated.normalize(device)


def recording_device(device: torch.device, stream: Any = None) -> torch.device:
    """Where ``event.record(stream)`` records: on ``stream``'s device, else on the current
    device's stream. torch.Event keeps only the device *type* it was made with
    (torch/csrc/Event.cpp: ``c10::Event(device->type(), ...)``; ``record()`` takes
    ``impl.getStream(impl.getDevice())``), so an event made for ``cuda:1`` records on GPU 0
    unless ``cuda:1`` was made current."""
    if stream is not None and getattr(stream, "device", None) is not None:
        return torch.device(stream.device)
    return torch.device(device.type, emulated.state.current_index)


def synchronize(device: Any = None) -> None:
    journal.count("sync", "synchronize")
    emulated.host_waited(device_of(device))


# --- memory -------------------------------------------------------------------------------------
def memory_stats(device: Any = None) -> OrderedDict[str, Any]:
    memory = emulated.memory
    return OrderedDict([
        ("allocated_bytes.all.current", memory.allocated),
        ("allocated_bytes.all.peak", memory.peak),
        ("reserved_bytes.all.current", memory.allocated),
        ("reserved_bytes.all.peak", memory.peak),
    ])


def memory_allocated(device: Any = None) -> int:
    return emulated.memory.allocated


def max_memory_allocated(device: Any = None) -> int:
    return emulated.memory.peak


def reset_peak_memory_stats(device: Any = None) -> None:
    emulated.memory.reset_peak()


def empty_cache() -> None:
    return None


# --- torch.accelerator --------------------------------------------------------------------------
def set_device_index(device: Any) -> None:
    emulated.state.current_index = int(device_of(device).index or 0)


@contextlib.contextmanager
def device_index(device: Any) -> Iterator[None]:
    previous = emulated.state.current_index
    if device is not None:
        set_device_index(device)
    try:
        yield
    finally:
        emulated.state.current_index = previous


def patch_accelerator(make_event: Callable[..., Any], total_memory: int,
                      memory_api: bool = True) -> None:
    """``torch.accelerator`` speaks for the emulated device. Without ``memory_api`` its memory
    functions are absent, as in torch releases before they existed."""
    kind = emulated.state.rules.device_type
    accelerator = torch.accelerator
    values: dict[str, Any] = {
        "is_available": lambda: True,
        "current_accelerator": lambda check_available=False: torch.device(kind),
        "device_count": lambda: emulated.state.rules.device_count,
        "current_device_index": lambda: emulated.state.current_index,
        "current_device_idx": lambda: emulated.state.current_index,
        "set_device_index": set_device_index,
        "set_device_idx": set_device_index,
        "device_index": device_index,
        "synchronize": synchronize,
        "current_stream": lambda device=None: FakeStream(device_of(device), make_event),
        "set_stream": lambda stream: None,
        "get_device_capability": lambda device=None: {"supported_dtypes": [
            torch.float32, torch.float16, torch.bfloat16]},
    }
    memory = {
        "memory_stats": memory_stats, "memory_allocated": memory_allocated,
        "max_memory_allocated": max_memory_allocated,
        "reset_peak_memory_stats": reset_peak_memory_stats,
        "reset_accumulated_memory_stats": lambda device=None: None,
        "memory_reserved": memory_allocated, "max_memory_reserved": max_memory_allocated,
        "empty_cache": empty_cache,
        "get_memory_info": lambda device=None: (total_memory - emulated.memory.allocated,
                                                total_memory),
    }
    for name, value in values.items():
        replace(accelerator, name, value)
    for name, value in memory.items():
        if memory_api:
            replace(accelerator, name, value)
        else:
            remove(accelerator, name)


def patch_event(make_event: Callable[..., Any]) -> None:
    """``torch.Event(device=<emulated>)`` makes the personality's event; other devices get
    torch's own."""
    real = torch.Event

    class Event:
        def __new__(cls, device: Any = None, *, enable_timing: bool = True,
                    blocking: bool = False, interprocess: bool = False) -> Any:
            if device is None or emulated.is_emulated(device):
                return make_event(device_of(device), enable_timing=enable_timing)
            return real(device=device, enable_timing=enable_timing, blocking=blocking,
                        interprocess=interprocess)

    replace(torch, "Event", Event)


def coarse(tick_s: float) -> None:
    """``time.perf_counter`` / ``monotonic`` (and their ``_ns``) step by ``tick_s``, like a
    coarse platform timer."""
    tick_ns = max(1, round(tick_s * 1e9))

    def quantised(source: Callable[[], int]) -> tuple[Callable[[], float], Callable[[], int]]:
        def ns() -> int:
            return source() // tick_ns * tick_ns

        def seconds() -> float:
            return ns() / 1e9

        return seconds, ns

    for name in ("perf_counter", "monotonic"):
        seconds, ns = quantised(getattr(time, f"{name}_ns"))
        replace(time, name, seconds)
        replace(time, f"{name}_ns", ns)
