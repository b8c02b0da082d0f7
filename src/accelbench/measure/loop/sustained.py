"""The sustained measurement: a case (or a peak) run for minutes, its throughput per interval,
with the device's sensors read over the same intervals.

The ordinary measurement is a burst: about 10 s after warm-up. A laptop, or an accelerator at its
power or thermal limit, does not hold its burst; mamf-finder publishes burst and sustained
matrix-product peaks apart for that reason (its MSMF). Here the work runs for ``duration_s``,
split into intervals of ``interval_s``; each interval records the steps it ran and the seconds
they took, timed to the synchronisation at its end, and the sensors (clock, temperature, power,
and the device's clock events) sampled while it ran (``measure/trackers/interval_sensors.py``). The burst,
the sustained rate, their ratio and the verdict are figures over this series
(``results/sustained.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelbench.measure.loop.stop import DEFAULT_SUSTAINED_INTERVAL_S
from accelbench.measure.trackers.interval_sensors import EVENTS, Reading, SensorReader

#: The default interval (``--sustained-interval``; tests use a fraction of a second).
DEFAULT_INTERVAL_S = DEFAULT_SUSTAINED_INTERVAL_S
#: The sensors every series names, whether or not they can be read here.
SENSORS = ("clock_mhz", "temperature_c", "power_w")

#: A step (or window of steps) run synchronised: returns the units of work it did (steps for a
#: case, FLOP or bytes for a peak); None counts as one step.
Work = Callable[[], "float | int | None"]
Progress = Callable[[float, float], None]


@dataclass
class SensorSeries:
    """One sensor over the run: a value per interval (None where it could not be read)."""

    values: list[float | None] = field(default_factory=list)
    #: Why it could not be read ("n/a: ..."), the last reason given; "" when it always was.
    na: str = ""
    limit: float | None = None

    def add(self, reading: Reading | None) -> None:
        if reading is None:
            reading = Reading.missing("the reader gave no such sensor")
        self.values.append(reading.value)
        if reading.value is None:
            self.na = reading.na or "n/a: not read"
        if reading.limit is not None:
            self.limit = reading.limit

    @property
    def readable(self) -> bool:
        return any(value is not None for value in self.values)

    def to_dict(self) -> dict[str, Any]:
        return {"values": list(self.values), "na": self.na, "limit": self.limit}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SensorSeries:
        return cls(list(data.get("values", [])), str(data.get("na", "")), data.get("limit"))


@dataclass
class SustainedSeries:
    """The time series of a sustained run: per interval, the work done and the seconds it took,
    and each sensor's reading."""

    interval_s: float
    duration_s: float
    #: What the work is counted in: "steps" for a case, "FLOP" or "bytes" for a peak.
    unit: str = "steps"
    work: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    #: Seconds from the run's start to each interval's end (its place on the time axis).
    ends: list[float] = field(default_factory=list)
    sensors: dict[str, SensorSeries] = field(default_factory=lambda: {n: SensorSeries() for n in SENSORS})
    #: Per interval, what the device said held its clock back while it ran (NVML's clock-event
    #: reasons, a Mac's thermal pressure above nominal; [] for nothing), None where not said;
    #: ``events_na`` says why (empty when the device gives none: the CPU).
    events: list[list[str] | None] = field(default_factory=list)
    events_na: str = ""

    @property
    def rates(self) -> list[float]:
        """Throughput per interval (units per second)."""
        return [w / s for w, s in zip(self.work, self.seconds, strict=True) if s > 0]

    def to_dict(self) -> dict[str, Any]:
        return {"interval_s": self.interval_s, "duration_s": self.duration_s, "unit": self.unit,
                "work": list(self.work), "seconds": list(self.seconds), "ends": list(self.ends),
                "sensors": {name: series.to_dict() for name, series in self.sensors.items()},
                "events": [None if words is None else list(words) for words in self.events],
                "events_na": self.events_na}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SustainedSeries:
        return cls(float(data["interval_s"]), float(data["duration_s"]), str(data.get("unit", "steps")),
                   [float(v) for v in data.get("work", [])], [float(v) for v in data.get("seconds", [])],
                   [float(v) for v in data.get("ends", [])],
                   {name: SensorSeries.from_dict(series)
                    for name, series in (data.get("sensors") or {}).items()},
                   [None if words is None else [str(word) for word in words]
                    for words in data.get("events") or []],
                   str(data.get("events_na", "")))


def run_sustained(work: Work, duration_s: float, interval_s: float = DEFAULT_INTERVAL_S,
                  sensors: SensorReader | None = None, unit: str = "steps",
                  progress: Progress | None = None,
                  clock: Callable[[], float] = time.perf_counter) -> SustainedSeries:
    """Run ``work`` (synchronised: it returns when the device is done) back to back for
    ``duration_s`` seconds of timed work, in intervals of at least ``interval_s`` (an interval
    ends with the first call that reaches it, so a step longer than the interval is one whole
    interval). The sensors are sampled while each interval runs and read out after it,
    outside the timed seconds."""
    series = SustainedSeries(interval_s, duration_s, unit)
    elapsed = 0.0
    while elapsed < duration_s:
        if sensors is not None:
            sensors.begin()
        done, start = 0.0, clock()
        now = start
        while now - start < interval_s:
            units = work()
            done += 1.0 if units is None else float(units)
            now = clock()
        seconds = now - start
        elapsed += seconds
        series.work.append(done)
        series.seconds.append(seconds)
        series.ends.append(elapsed)
        readings = sensors.read() if sensors is not None else {}
        events = readings.pop(EVENTS, None)
        if events is not None:
            series.events.append(None if events.na else list(events.events))
            series.events_na = events.na or series.events_na
        for name in dict.fromkeys([*SENSORS, *readings]):
            series.sensors.setdefault(name, SensorSeries()).add(
                readings.get(name) if sensors is not None else Reading.missing("no sensor reader given"))
        if progress is not None:
            progress(min(elapsed, duration_s), duration_s)
    return series
