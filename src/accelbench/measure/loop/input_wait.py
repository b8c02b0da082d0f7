"""How long the device sat idle waiting for input, over a case's measured steps.

The timed loop fetches the next batch after queueing the current step, as a training loop does,
so on an asynchronous device the fetch overlaps the device's queued work and costs nothing
unless it outlasts that work. The host's fetch time therefore overstates the wait on such a
device (a device-bound case with a slow-looking loader would be called input-bound); what counts
is the time the device idled. Per kind of device:

- synchronous (the CPU): a step's work is done when it returns, so the fetch time is the idle
  time: ``host fetch time``;
- asynchronous with timing events that are safe per step (CUDA, XPU): a timing event is
  recorded in the device's queue before and after each fetch; the time between them on the
  device is the idle gap the fetch caused (zero while queued work covered it), read after the
  window's synchronisation: ``device idle (timing events)``. Cost: two event records per step
  (microseconds), no synchronisation. Every record gets a new event: a recycled one can read a
  previous window's timestamp. The events a window records are made before the window's clock
  starts (``prepare``, called by the loop): creating one is a host call (``cudaEventCreate``,
  which can take a driver lock), not the device's work, so it stays out of the timed steps;
- asynchronous where recording an event around every step would change or fail the run (the
  adapter says so: ``step_events_safe``; MPS, whose records commit the command buffer and whose
  reads raise for two events that complete together): no events at all, the host fetch time
  labelled an upper bound;
- asynchronous without timing events: the host fetch time, labelled an upper bound.

An event that cannot be recorded or read does not fail the case: the case's input wait becomes
the host fetch time, labelled an upper bound with the error. The host fetch time is kept beside
it (``input_fetch_s``) in every case.
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
#: The device's events would disturb or fail the timed steps (DeviceAdapter.step_events_safe).
UPPER_BOUND_UNSAFE_EVENTS = ("host fetch time (upper bound: this device's timing events are not "
                             "safe around every step)")
#: Followed by the error: a timing event could not be recorded or read during the case.
UPPER_BOUND_EVENT_FAILED = "host fetch time (upper bound: a timing event failed: "


def _method(device: Device, events: bool) -> str:
    if not device.is_async:
        return HOST
    if not device.step_events_safe:
        return UPPER_BOUND_UNSAFE_EVENTS
    return EVENTS if events else UPPER_BOUND


class InputWait:
    """Times fetches; ``device_idle_s`` and ``host_fetch_s`` accumulate until ``reset()``."""

    def __init__(self, device: Device) -> None:
        use_events = device.is_async and device.step_events_safe
        self._make_event = timing_event_factory(device) if use_events else None
        self.method = _method(device, self._make_event is not None)
        self.host_fetch_s = 0.0
        self._events_idle_s = 0.0
        self._pending: list[tuple[TimingEvent, TimingEvent]] = []
        #: Events made ahead and never recorded, for the next fetches.
        self._spare: list[TimingEvent] = []

    def prepare(self, fetches: int) -> None:
        """Make the events ``fetches`` fetches will record, now (before a timed window), so that
        none is created inside it. Events are never recycled: each is recorded once."""
        if self._make_event is None:
            return
        try:
            while len(self._spare) < 2 * fetches:
                self._spare.append(self._make_event())
        except Exception as error:
            self._give_up(error)

    def fetch(self, next_batch: Callable[[], Any]) -> Any:
        """``next_batch()``, timed; StopIteration passes through (the time still counts)."""
        before = self._event()
        start = time.perf_counter()
        try:
            return next_batch()
        finally:
            self.host_fetch_s += time.perf_counter() - start
            if before is not None:
                after = self._event()
                if after is not None:
                    self._pending.append((before, after))

    def settle(self) -> None:
        """Read the events of the fetches so far; call only after the device synchronised."""
        pending, self._pending = self._pending, []
        try:
            for before, after in pending:
                self._events_idle_s += max(before.elapsed_time(after), 0.0) / 1000.0
        except Exception as error:  # a reading that fails costs the figure its precision only
            self._give_up(error)

    @property
    def device_idle_s(self) -> float:
        return self._events_idle_s if self._make_event else self.host_fetch_s

    def reset(self) -> None:
        self.settle()
        self.host_fetch_s = self._events_idle_s = 0.0

    def _event(self) -> TimingEvent | None:
        """A new recorded event, or None once events are given up. A fresh event for every
        record (a recycled one can read a previous window's timestamp: MPS before torch's
        per-record generations), made ahead by ``prepare``; made here only when a window
        fetched more than it was prepared for."""
        if self._make_event is None:
            return None
        try:
            event = self._spare.pop() if self._spare else self._make_event()
            event.record()
        except Exception as error:
            self._give_up(error)
            return None
        return event

    def _give_up(self, error: Exception) -> None:
        """From now on (and for the figures so far) the case's input wait is the host fetch
        time, which holds every fetch: an upper bound, labelled with what failed."""
        self._make_event = None
        self._pending.clear()
        self._spare.clear()
        text = f"{type(error).__name__}: {error}".strip().splitlines()[0][:200]
        self.method = f"{UPPER_BOUND_EVENT_FAILED}{text})"
