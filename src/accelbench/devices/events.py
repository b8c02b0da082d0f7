"""Device timing events: markers recorded in a device's queue and stamped by the device when it
reaches them, so the host can learn how long the device sat idle without waiting for it.

Two events recorded around a host-side pause (fetching the next batch) complete at
``max(when the queued work ends, when the host records the second event)``, so the time between
them is exactly how long the device idled because of the pause: zero while queued work covered
it. Reading that time needs both events complete, so it is read after a synchronisation the
caller makes anyway (a window's end), never by waiting for the device.

A record with no stream goes to the *current* device's stream (torch/csrc/Event.cpp), so the
caller makes the device current first (``Device.current()``). Whether events may be recorded
around every step at all is the adapter's ``step_events_safe`` (not on MPS), asked by the caller.

Creating the Python object creates no device event: torch creates it at the object's first
``record()`` (aten/src/ATen/cuda/CUDAEvent.h: "constructed lazily when first recorded"; c10's
CUDAGuardImpl::record and XPU's alike), a host call (``cudaEventCreateWithFlags``) that can take a
driver lock. So the factory's events come recorded once, where they are made: callers make them
before a timed window, and the record inside it is then only a record. That needs a device whose
event, recorded again, reads its new recording (CUDA's ``cudaEventRecord`` replaces the last
one); one that reads its previous recording (MPS's, before torch's per-record generations) would
time a window from before it began. The factory finds out once, with a trial event recorded twice
around a short idle moment, and makes such a device's events unrecorded (created in the window,
as before, but read right).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import torch

if TYPE_CHECKING:
    from typing_extensions import Self

from accelbench.devices.base import Device


class TimingEvent(Protocol):
    def record(self) -> None: ...

    def elapsed_time(self, end_event: Self, /) -> float:
        """Milliseconds from this event to ``end_event`` (both complete)."""
        ...


#: The host idles this long between a trial event's two records: an event that keeps its first
#: recording reads at least this gap to an event recorded right after its second.
REUSE_PROBE_S = 0.005


def timing_event_factory(device: Device) -> Callable[[], TimingEvent] | None:
    """A maker of timed events on ``device``, each already recorded once (created on the device)
    where the device reads a re-recorded event anew; None on a synchronous device (the CPU: its
    host time is its device time) or where this torch cannot time events on it."""
    if not device.is_async:
        return None
    own = getattr(device.adapter, "timing_event", None)
    if own is not None:
        def make_own() -> TimingEvent:
            return own(device.index)
        make: Callable[[], TimingEvent] = make_own
    else:
        def make_torch() -> TimingEvent:
            return torch.Event(device=torch.device(device.torch_device), enable_timing=True)
        make = make_torch
        try:  # one trial pair, outside any timed region: some back ends construct but cannot time
            first, second = make(), make()
            first.record()
            second.record()
            device.synchronize()
            first.elapsed_time(second)
        except Exception:  # the caller falls back to host time and says so
            return None
    if not reads_a_new_record(device, make):
        return make

    def make_created() -> TimingEvent:
        event = make()
        event.record()  # the device's event is created here, not at its first record in a window
        return event
    return make_created


def reads_a_new_record(device: Device, make: Callable[[], TimingEvent]) -> bool:
    """Whether an event recorded a second time reads its second recording: recorded, the host
    idle REUSE_PROBE_S, recorded again beside a fresh event; the two must read (nearly) together.
    A device that cannot say is taken not to (its events are then made unrecorded)."""
    try:
        again = make()
        again.record()
        device.synchronize()
        time.sleep(REUSE_PROBE_S)
        again.record()
        fresh = make()
        fresh.record()
        device.synchronize()
        return again.elapsed_time(fresh) < REUSE_PROBE_S * 1000.0 / 2
    except Exception:
        return False
