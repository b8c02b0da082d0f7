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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from accelbench.devices.base import Device


class TimingEvent(Protocol):
    def record(self) -> None: ...

    def elapsed_time(self, end_event: TimingEvent) -> float:
        """Milliseconds from this event to ``end_event`` (both complete)."""
        ...


def timing_event_factory(device: Device) -> Callable[[], TimingEvent] | None:
    """A maker of timed events on ``device``; None on a synchronous device (the CPU: its host time
    is its device time) or where this torch cannot time events on it."""
    if not device.is_async:
        return None
    own = getattr(device.adapter, "timing_event", None)
    if own is not None:
        def make_own() -> TimingEvent:
            return own(device.index)
        return make_own

    def make() -> TimingEvent:
        return torch.Event(device=torch.device(device.torch_device), enable_timing=True)

    try:  # one trial pair, outside any timed region: some back ends construct but cannot time
        first, second = make(), make()
        first.record()
        second.record()
        device.synchronize()
        first.elapsed_time(second)
    except Exception:  # the caller falls back to host time and says so
        return None
    return make
