"""What a matmul peak is: the clock and what held it back while its windows were timed, and the
short burst beside it.

The peak is timed in windows of at least 0.1 s (``queued.py``): on a 700 W part that is the
power-capped rate (an H200 read bf16 688-703 TFLOP/s while NVML said "software power cap" in
every interval, at 1.36-1.46 GHz). So the device's own sensors are sampled on a background thread
while the windows run (``IntervalSampler`` and ``mean_facts``, as a sustained run's intervals
are): the clock-event reasons seen in any sample and the mean SM clock. A reason among NVML's
slowdowns (power cap, thermal, power brake) makes the figure *capped*, and every surface says so.

Beside it, a true short burst, as mamf-finder measures one: single products, each after
``BURST_IDLE_S`` of idle (the power controller averages over longer than one product, so an idle
device runs its first products at boost clocks), the best of ``BURST_REPEATS``. It is kept beside
the windowed figure, never in its place: a workload runs for longer than a burst.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.devices import Device
from accelbench.devices.nvml import SLOWDOWN_REASONS
from accelbench.measure.trackers.interval_sensors import IntervalSampler, mean_facts

#: Sample the sensors this often while the windows run (a window lasts at least 0.1 s).
SAMPLE_PERIOD_S = 0.02
#: The short burst: this many single products, each after this long idle.
BURST_REPEATS = 3
BURST_IDLE_S = 0.3
_EVENTS, _CLOCK = "gpu_clock_events", "gpu_sm_clock_mhz"


@dataclass(frozen=True)
class PeakClocks:
    """The device's word on its clock while the peak's windows ran."""

    #: NVML's slowdown reasons seen in any sample (a power cap, a thermal slowdown): "capped".
    limited_by: tuple[str, ...] = ()
    #: The mean SM clock over the samples (MHz); None where not read.
    clock_mhz: float | None = None
    #: Why nothing was read ("" when it was).
    na: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"limited_by": list(self.limited_by), "clock_mhz": self.clock_mhz, "clocks_na": self.na}


def cap_words(limited_by: Any, clock_mhz: Any) -> str:
    """What held a figure's clock back, and the clock then: "software power cap at 1,410 MHz";
    "" for a figure nothing held back. Every surface that says a peak is capped words it here."""
    words = ", ".join(str(word) for word in limited_by or ())
    if not words:
        return ""
    return words + (f" at {clock_mhz:,.0f} MHz" if isinstance(clock_mhz, int | float) else "")


def capped_text(how: dict[str, Any]) -> str:
    """A stored figure's clocks (``PeakClocks.to_dict()`` keys) in words: "capped: software power
    cap at 1,410 MHz" for a capped figure, "" for one that is not."""
    words = cap_words(how.get("limited_by"), how.get("clock_mhz"))
    return f"capped: {words}" if words else ""


class ClockWatch:
    """``start`` before the timed windows, ``stop`` after: the :class:`PeakClocks` over them. The
    CPU is not sampled (it reports no clock-event reasons); ``read`` replaces the device's sensors
    (tests hand in their own)."""

    def __init__(self, device: Device, read: Callable[[], dict[str, Any]] | None = None,
                 period_s: float = SAMPLE_PERIOD_S) -> None:
        self.device = device
        self._read = read or device.sensors
        self._sampler = None if device.is_cpu and read is None else IntervalSampler(self._read)
        self._period = period_s

    def start(self) -> None:
        if self._sampler is not None:
            self._sampler.start(self._period)

    def stop(self) -> PeakClocks:
        if self._sampler is None:
            return PeakClocks(na="the CPU reports no clock-event reasons")
        samples = self._sampler.stop()
        if not samples:  # windows shorter than a sample period: once, now
            samples = [dict(self._read())]
        facts = mean_facts(samples)
        clock = facts.get(_CLOCK)
        events = facts.get(_EVENTS)
        if not isinstance(events, list):
            reason = facts.get("error") or (f"{self.device.name} reports no clock-event reasons "
                                            "(NVIDIA GPUs do, through NVML with nvidia-ml-py)")
            return PeakClocks((), clock if isinstance(clock, float) else None, str(reason))
        return PeakClocks(tuple(word for word in events if word in SLOWDOWN_REASONS),
                          clock if isinstance(clock, float) else None)


def short_burst(one_product: Callable[[], float], flop: float, repeats: int = BURST_REPEATS,
                idle_s: float = BURST_IDLE_S, sleep: Callable[[float], None] = time.sleep) -> float:
    """FLOP/s of the fastest of ``repeats`` single products (``one_product`` returns its synced
    seconds), each after ``idle_s`` of idle."""
    best = float("inf")
    for _ in range(repeats):
        sleep(idle_s)
        best = min(best, one_product())
    return flop / best
