"""How long the device sat idle waiting for input, over a case's measured steps.

The timed loop fetches the next batch after queueing the current step, as a training loop does,
so on an asynchronous device the fetch overlaps the device's queued work and costs nothing
unless it outlasts that work. The host's fetch time therefore overstates the wait on such a
device (a device-bound case with a slow-looking loader would be called input-bound); what counts
is the time the device idled. Per kind of device:

- synchronous (the CPU): a step's work is done when it returns, so the fetch time is the idle
  time: ``host fetch time``;
- asynchronous with timed events (CUDA, XPU, MPS where torch times them): a timing event is
  recorded in the device's queue before and after each fetch; the time between them on the
  device is the idle gap the fetch caused (zero while queued work covered it), read after the
  window's synchronisation: ``device idle (timing events)``. Cost: two event records per step
  (microseconds), no synchronisation;
- asynchronous without timed events: the host fetch time, labelled an upper bound.

The host fetch time is kept beside it (``input_fetch_s``) in every case.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from accelbench.devices import Device
from accelbench.devices.events import TimingEvent, timing_event_factory

HOST = "host fetch time (synchronous device)"
EVENTS = "device idle (timing events)"
UPPER_BOUND = "host fetch time (upper bound: no device timing events)"


class InputWait:
    """Times fetches; ``device_idle_s`` and ``host_fetch_s`` accumulate until ``reset()``."""

    def __init__(self, device: Device) -> None:
        self._make_event = timing_event_factory(device)
        self.method = HOST if not device.is_async else EVENTS if self._make_event else UPPER_BOUND
        self.host_fetch_s = 0.0
        self._events_idle_s = 0.0
        self._pending: list[tuple[TimingEvent, TimingEvent]] = []
        self._spare: list[TimingEvent] = []

    def fetch(self, next_batch: Callable[[], Any]) -> Any:
        """``next_batch()``, timed; StopIteration passes through (the time still counts)."""
        before = self._event() if self._make_event else None
        start = time.perf_counter()
        try:
            return next_batch()
        finally:
            self.host_fetch_s += time.perf_counter() - start
            if before is not None:
                after = self._event()
                self._pending.append((before, after))

    def settle(self) -> None:
        """Read the events of the fetches so far; call only after the device synchronised."""
        for before, after in self._pending:
            self._events_idle_s += max(before.elapsed_time(after), 0.0) / 1000.0
            self._spare += (before, after)
        self._pending.clear()

    @property
    def device_idle_s(self) -> float:
        return self._events_idle_s if self._make_event else self.host_fetch_s

    def reset(self) -> None:
        self.settle()
        self.host_fetch_s = self._events_idle_s = 0.0

    def _event(self) -> TimingEvent:
        # Reusing settled events keeps event creation (a driver call on CUDA) out of the loop.
        assert self._make_event is not None
        event = self._spare.pop() if self._spare else self._make_event()
        event.record()
        return event
