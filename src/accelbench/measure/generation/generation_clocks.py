"""How a generation round is timed: one clock per way, chosen per device, and what a round keeps.

The record's ``timing_method`` says which:

- the CPU: the host clock, per token. A CPU step is done when it returns;
- an asynchronous device with timing events that are safe per step (CUDA, XPU): time to first
  token by the host clock, with one synchronisation when the first token is ready (the moment a
  user gets it); then a timing event recorded after each decode step, no host synchronisation
  until the round ends, where the events are read: per-token times and their percentiles. That is
  the device's cadence: no token is read to the host between steps, so the host keeps queueing
  ahead, which a loop that reads each token (``generate()``, a streaming server) cannot; its
  inter-token latency is optimistic against such a loop;
- an asynchronous device whose events are not safe per step (MPS: each record commits the
  command buffer, and two events that complete together raise) or that has none: windows of
  ``window_tokens`` decode steps, each closed by one synchronisation and timed by the host clock
  (the synchronisation included); the mean time per token of each window is kept, and no
  per-token percentiles are reported;
- streamed (``stream=True``, ``--stream``), on every device: each token is read to the host as it
  is made (``token.tolist()``, what a streaming server does before it sends the token), and the
  host clock times each step, the read included. A streamed case did different work from an
  unstreamed one (``streamed`` in its figures says which).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.devices import Device
from accelbench.devices.events import TimingEvent, timing_event_factory

HOST = "host clock per token (synchronous device)"
EVENTS = ("device timing events per token: the device's cadence, no token read to the host between "
          "steps (optimistic against a loop that reads each token, as generate() and a streaming "
          "server do: --stream); time to first token by the host clock with one synchronisation")
STREAMED = ("host clock per token, each token read to the host as it is made (token.tolist() per "
            "step, as a streaming server does)")
WINDOWS = ("host clock over windows of {window} tokens, one synchronisation each (this device's "
           "timing events are not safe per token): no per-token percentiles")
WINDOWS_NO_EVENTS = ("host clock over windows of {window} tokens, one synchronisation each (no device "
                     "timing events): no per-token percentiles")
#: Followed by the error: reading the events failed, the round's decode time is the host's.
EVENTS_FAILED = "host clock over the decode, one synchronisation (a timing event failed: "
WINDOW_TOKENS = 16


@dataclass(frozen=True)
class GenerationRound:
    """One timed generation: what was measured, nothing derived."""

    ttft_s: float
    #: The N - 1 decode steps after the first token.
    decode_s: float
    #: Per decode step, where the timing gives them (host clock or events); () under windows.
    token_times_s: tuple[float, ...] = ()
    #: (decode steps, seconds) of each window, under windows; () otherwise.
    windows: tuple[tuple[int, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"ttft_s": self.ttft_s, "decode_s": self.decode_s,
                "token_times_s": list(self.token_times_s), "windows": [list(w) for w in self.windows]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationRound:
        return cls(float(data["ttft_s"]), float(data["decode_s"]),
                   tuple(float(t) for t in data.get("token_times_s", ())),
                   tuple((int(n), float(s)) for n, s in data.get("windows", ())))


# --- clocks: one per way of timing ----------------------------------------------------------------
class HostClock:
    """The synchronous device: the host clock is the device's."""

    def __init__(self, device: Device, method: str = HOST) -> None:
        self.device = device
        self.method = method

    def start(self) -> None:
        self.device.synchronize()
        self._start = time.perf_counter()

    def first_token(self) -> None:
        self.device.synchronize()
        now = time.perf_counter()
        self._ttft = now - self._start
        self._last = self._decode_start = now
        self._times: list[float] = []

    def step(self) -> None:
        now = time.perf_counter()
        self._times.append(now - self._last)
        self._last = now

    def finish(self) -> GenerationRound:
        self.device.synchronize()
        decode = time.perf_counter() - self._decode_start
        return GenerationRound(self._ttft, decode, tuple(self._times))


class EventClock(HostClock):
    """Events recorded after each decode step, read after the round's one final synchronisation.
    The events are made before the round (a fresh one per record: a recycled event can read an
    earlier timestamp)."""

    def __init__(self, device: Device, make_event: Any, steps: int) -> None:
        super().__init__(device)
        self.method = EVENTS
        self._make_event = make_event
        self._steps = steps

    def start(self) -> None:
        self._events: list[TimingEvent] = [self._make_event() for _ in range(self._steps + 1)]
        self._recorded = 0
        super().start()

    def first_token(self) -> None:
        super().first_token()
        self.step()

    def step(self) -> None:
        self._events[self._recorded].record()
        self._recorded += 1

    def finish(self) -> GenerationRound:
        self.device.synchronize()
        host_decode = time.perf_counter() - self._decode_start
        try:
            events = self._events[:self._recorded]
            pairs = zip(events, events[1:], strict=False)
            times = tuple(max(a.elapsed_time(b), 0.0) / 1000.0 for a, b in pairs)
            decode = max(events[0].elapsed_time(events[-1]), 0.0) / 1000.0 if times else 0.0
        except Exception as error:  # the round keeps its host time; the method says what failed
            text = f"{type(error).__name__}: {error}".strip().splitlines()[0][:200]
            self.method = f"{EVENTS_FAILED}{text})"
            return GenerationRound(self._ttft, host_decode)
        return GenerationRound(self._ttft, decode, times)


class WindowClock(HostClock):
    """Windows of decode steps, each ended by one synchronisation, timed by the host clock."""

    def __init__(self, device: Device, window: int, method: str) -> None:
        super().__init__(device)
        self.window = window
        self.method = method.format(window=window)

    def first_token(self) -> None:
        super().first_token()
        self._windows: list[tuple[int, float]] = []
        self._in_window = 0

    def step(self) -> None:
        self._in_window += 1
        if self._in_window == self.window:
            self._close()

    def _close(self) -> None:
        self.device.synchronize()
        now = time.perf_counter()
        self._windows.append((self._in_window, now - self._last))
        self._last, self._in_window = now, 0

    def finish(self) -> GenerationRound:
        if self._in_window:
            self._close()
        return GenerationRound(self._ttft, sum(s for _, s in self._windows), windows=tuple(self._windows))


def clock_maker(device: Device, decode_steps: int, window_tokens: int = WINDOW_TOKENS,
                stream: bool = False) -> Callable[[], HostClock]:
    """A maker of a fresh clock per round. Whether the device's events can time decode steps is
    tried once, here (a trial pair of events and a synchronisation, outside every round). A
    streamed round reads each token to the host, which waits for the device: the host clock
    times every step on every device."""
    if stream:
        return lambda: HostClock(device, STREAMED)
    if not device.is_async:
        return lambda: HostClock(device)
    if not device.step_events_safe:
        return lambda: WindowClock(device, window_tokens, WINDOWS)
    make_event = timing_event_factory(device)
    if make_event is None:
        return lambda: WindowClock(device, window_tokens, WINDOWS_NO_EVENTS)
    return lambda: EventClock(device, make_event, decode_steps)


__all__ = ["EVENTS", "EVENTS_FAILED", "HOST", "STREAMED", "WINDOWS", "WINDOWS_NO_EVENTS", "WINDOW_TOKENS",
           "EventClock", "GenerationRound", "HostClock", "WindowClock", "clock_maker"]
