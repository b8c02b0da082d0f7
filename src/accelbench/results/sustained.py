"""Burst against sustained: the figures and the verdict of a sustained run, over its recorded
time series (``measure/loop/sustained.py`` records it; these are pure functions of the record, so a
stored result can be judged again).

* **burst**: the first fifth of the run's intervals (at most its first minute);
* **sustained**: the last half;
* each is the geometric mean of its intervals' throughput, and the **ratio** sustained/burst has
  a Student's t interval on the logarithms (Welch: the two parts may spread differently), at the
  project's confidence. Each interval averages many steps, so its throughput is close to normal
  and the t interval is honest with a handful of intervals a part, where a bootstrap's percentile
  interval would be far too narrow (the reason ``compare/verdict.py`` gives for its own rule).
* the verdict: **throttles** to X% only when the whole interval lies below the verdicts' noise
  band (1/(1 + MIN_EFFECT), the band ``compare`` calls "same within noise"), **holds** when the
  whole interval lies at or above that edge, and **can't tell** otherwise (a run too noisy or too
  short to say);
* with a throttle, first what the device itself said held its clock back during the sustained
  intervals (NVML's clock-event reasons such as "software power cap", "hardware thermal
  slowdown"; a Mac's thermal pressure above nominal), then the sensor change that coincides:
  "clock down a%", "temperature at limit", "memory temperature at limit", "power capped" (or,
  where no limit is known, "temperature up N °C", "power down a%"), or "cause not visible" when
  nothing was said and no sensor moved beyond its own noise. A sensor moved when its own
  burst-to-sustained interval excludes no change and the change is larger than its reading's
  grain. The sensors are sampled while each interval runs, never only after its closing sync.

With ``--repeat N`` each process records its own series, and the case's figures pool them: the
burst intervals of every process against the sustained intervals of every process (each process
starts cold, so its burst is a burst), sensors likewise; the record keeps the first process's
series for the figure and every process's own figures beside it (``engine/repeat.py``).

The *drift* flag (``results/stats.drift``) stays what it is: a trend inside an ordinary
measurement. This is the explicit long measurement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from accelbench.devices.nvml import SLOWDOWN_REASONS
from accelbench.measure.loop.median_ci import CONFIDENCE
from accelbench.measure.loop.sustained import SensorSeries, SustainedSeries
from accelbench.results.stats import MIN_EFFECT, t_interval
from accelbench.results.validate import Record

HOLDS, THROTTLES, CANT_TELL = "holds", "throttles", "can't tell"
#: The burst is the first fifth of the run, and no more than its first minute.
BURST_SHARE = 0.2
BURST_MAX_S = 60.0
#: A part needs this many intervals for a spread, so an interval.
MIN_PART_INTERVALS = 2
#: A clock or power change smaller than this is the reading's grain, not a change.
SENSOR_MIN_CHANGE = 0.02
#: A temperature rise smaller than this (°C) is not a rise; within this of its limit is "at" it.
TEMPERATURE_MIN_RISE_C = 2.0
TEMPERATURE_AT_LIMIT_C = 3.0
#: Mean power within this share of the cap is "capped".
POWER_AT_CAP = 0.03


def log_ratio_interval(before: Sequence[float], after: Sequence[float],
                       confidence: float = CONFIDENCE) -> tuple[float, float, float] | None:
    """(ratio, low, high) of the geometric mean of ``after`` over that of ``before``: Welch's t
    interval on the logarithms. None with fewer than 2 positive values a side."""
    a = np.log(np.asarray([v for v in before if v and v > 0], dtype=float))
    b = np.log(np.asarray([v for v in after if v and v > 0], dtype=float))
    if len(a) < MIN_PART_INTERVALS or len(b) < MIN_PART_INTERVALS:
        return None
    centre, low, high = t_interval(b, a, confidence)
    return math.exp(centre), math.exp(low), math.exp(high)


def _difference_interval(before: Sequence[float], after: Sequence[float],
                         confidence: float = CONFIDENCE) -> tuple[float, float, float] | None:
    """(difference of means, low, high) of ``after`` - ``before``: Welch's t (for temperatures)."""
    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if len(a) < MIN_PART_INTERVALS or len(b) < MIN_PART_INTERVALS:
        return None
    return t_interval(b, a, confidence)


def parts(series: SustainedSeries) -> tuple[slice, slice]:
    """The burst's intervals (the first fifth, at most those ending within the first minute, at
    least one) and the sustained intervals (the last half)."""
    count = len(series.seconds)
    burst = max(1, int(count * BURST_SHARE))
    within_minute = sum(1 for end in series.ends if end <= BURST_MAX_S) if series.ends else burst
    burst = max(1, min(burst, within_minute))
    return slice(0, burst), slice(count - count // 2 if count > 1 else 0, count)


def _geometric_mean(values: Sequence[float]) -> float | None:
    positive = [v for v in values if v > 0]
    return math.exp(float(np.mean(np.log(positive)))) if positive else None


@dataclass(frozen=True)
class SustainedFigures(Record):
    """Burst and sustained throughput (units per second), their ratio with its interval, the
    verdict and the sensor change behind it."""

    unit: str
    burst: float | None
    sustained: float | None
    ratio: float | None
    low: float | None
    high: float | None
    confidence: float
    burst_intervals: int
    sustained_intervals: int
    verdict: str
    #: With a throttle: the coinciding sensor change(s), or "cause not visible"; else "".
    cause: str = ""
    #: Why the verdict is "can't tell"; "" otherwise.
    reason: str = ""
    #: Each sensor's change from burst to sustained, as words ("clock -12%", "n/a: ...").
    sensors: dict[str, str] = field(default_factory=dict)
    #: How many processes' series the figures pool (--repeat N); 1 for one process.
    processes: int = 1

    @property
    def against(self) -> str:
        """What the ratio compares with, in words: "its own first 3 intervals" (the run's own
        first fifth, never a burst figure stored elsewhere, such as the roofline's)."""
        count = max(1, self.burst_intervals // max(self.processes, 1))
        return (f"its own first {count} interval{'s' if count != 1 else ''}"
                + (" in each process" if self.processes > 1 else ""))

    def describe(self, burst_shown: str = "") -> str:
        """"throttles to 78% of its own first 3 intervals (95% CI 74–81%): clock down 12%",
        "holds the rate of its own first 3 intervals (99%, ...)"; with ``burst_shown`` (that
        rate, formatted) "... of its own first 3 intervals at 6.66 GB/s ..."."""
        if self.ratio is None:
            return f"{self.verdict}: {self.reason}"
        against = f"{self.against} at {burst_shown}" if burst_shown else self.against
        interval = (f"{self.confidence:.0%} CI {self.low:.0%}–{self.high:.0%}"
                    if self.low is not None and self.high is not None else "no interval")
        if self.processes > 1:
            interval += f", {self.processes} processes pooled"
        if self.verdict == THROTTLES:
            return f"throttles to {self.ratio:.0%} of {against} ({interval}): {self.cause}"
        if self.verdict == HOLDS:
            return f"holds the rate of {against} ({self.ratio:.0%}, {interval})"
        return f"can't tell ({self.ratio:.0%} of {against}, {interval}): {self.reason}"

    @property
    def note(self) -> str:
        """The table's short note: "throttles 78%", "holds", or ""."""
        if self.verdict == THROTTLES and self.ratio is not None:
            return f"throttles {self.ratio:.0%}"
        return "holds" if self.verdict == HOLDS else ""


#: One process's series split into its burst and sustained intervals.
_Split = tuple[SustainedSeries, slice, slice]


def _splits(series: Sequence[SustainedSeries]) -> list[_Split]:
    return [(one, *parts(one)) for one in series]


def _rates(splits: Sequence[_Split], sustained_side: bool) -> list[float]:
    return [rate for one, burst, held in splits for rate in one.rates[held if sustained_side else burst]]


def sustained_figures(series: SustainedSeries | Sequence[SustainedSeries], min_effect: float = MIN_EFFECT,
                      confidence: float = CONFIDENCE) -> SustainedFigures:
    """The figures and the verdict of ``series`` (or of several processes' series, pooled); see
    the module docstring."""
    splits = _splits([series] if isinstance(series, SustainedSeries) else series)
    burst, sustained = _rates(splits, False), _rates(splits, True)
    figures = SustainedFigures(
        splits[0][0].unit, _geometric_mean(burst), _geometric_mean(sustained), None, None, None,
        confidence, len(burst), len(sustained), CANT_TELL, sensors=_sensor_changes(splits),
        processes=len(splits))
    interval = log_ratio_interval(burst, sustained, confidence)
    if interval is None:
        ratio = figures.sustained / figures.burst if figures.burst and figures.sustained else None
        return replace(figures, ratio=ratio,
                       reason=f"the burst holds {len(burst)} interval(s) and the sustained part "
                              f"{len(sustained)}; each needs {MIN_PART_INTERVALS}: run longer or use "
                              "shorter intervals")
    ratio, low, high = interval
    figures = replace(figures, ratio=ratio, low=low, high=high)
    edge = 1 / (1 + min_effect)
    if high < edge:
        return replace(figures, verdict=THROTTLES, cause=_cause(splits, confidence))
    if low >= edge:
        return replace(figures, verdict=HOLDS)
    return replace(figures, reason=f"the interval reaches across the -{min_effect:.0%} noise band's "
                                   "edge; a longer run (more intervals) would narrow it")


def _values(splits: Sequence[_Split], name: str, sustained_side: bool) -> list[float]:
    values = []
    for one, burst, held in splits:
        sensor = one.sensors.get(name)
        if sensor is not None:
            values += [v for v in sensor.values[held if sustained_side else burst] if v is not None]
    return values


def _sensor(splits: Sequence[_Split], name: str) -> SensorSeries | None:
    return splits[0][0].sensors.get(name)


def _events(splits: Sequence[_Split], sustained_side: bool) -> list[list[str]]:
    """The clock events of each interval of one side that said them (unread ones left out)."""
    return [words for one, burst, held in splits
            for words in one.events[held if sustained_side else burst] if words is not None]


def _slowdowns(words: list[str]) -> list[str]:
    return [word for word in words if word in SLOWDOWN_REASONS or word.startswith("thermal pressure")]


def _events_words(splits: Sequence[_Split]) -> str | None:
    """"software power cap in 8/8 sustained intervals (0/3 burst)", "none seen", or the reason
    they were not read; None for a device that gives none (the CPU)."""
    first = splits[0][0]
    if not first.events:
        return None
    burst, held = _events(splits, False), _events(splits, True)
    if not burst and not held:
        return first.events_na or "n/a: not read"
    counts = [f"{word} in {sum(word in words for words in held)}/{len(held)} sustained intervals "
              f"({sum(word in words for words in burst)}/{len(burst)} burst)"
              for word in dict.fromkeys(w for words in burst + held for w in words)]
    return "; ".join(counts) or "none seen"


def _sensor_changes(splits: Sequence[_Split]) -> dict[str, str]:
    """Each sensor's mean in the burst and in the sustained part, in words (or its "n/a"), and
    the clock events in each part."""
    words = {}
    events = _events_words(splits)
    if events is not None:
        words["clock_events"] = events
    for name, sensor in splits[0][0].sensors.items():
        before, after = _values(splits, name, False), _values(splits, name, True)
        if not before or not after:
            words[name] = sensor.na or "n/a: not read in both parts"
            continue
        first, last = float(np.mean(before)), float(np.mean(after))
        change = f"{last - first:+.1f} °C" if name.endswith("temperature_c") else (
            f"{(last / first - 1):+.1%}" if first else f"{last - first:+g}")
        words[name] = f"{first:.4g} -> {last:.4g} ({change})"
    return words


def _cause(splits: Sequence[_Split], confidence: float) -> str:
    """What the device said and the sensor changes that coincide with the throttle, or "cause
    not visible" (naming the sensors that could not be read, which might have shown one)."""
    causes = _events_cause(splits)
    clock = log_ratio_interval(_values(splits, "clock_mhz", False), _values(splits, "clock_mhz", True),
                               confidence)
    if clock is not None and clock[2] < 1 and 1 - clock[0] >= SENSOR_MIN_CHANGE:
        causes.append(f"clock down {1 - clock[0]:.0%}")
    causes += _temperature_cause(splits, confidence, "temperature_c", "temperature")
    causes += _temperature_cause(splits, confidence, "memory_temperature_c", "memory temperature")
    causes += _power_cause(splits, confidence)
    if causes:
        return ", ".join(causes)
    # The unread sensors by name only: why each could not be read is in ``sensors``.
    first = splits[0][0]
    unread = [name.rsplit("_", 1)[0].replace("_", " ")
              for name, sensor in first.sensors.items() if not sensor.readable]
    if first.events and not _events(splits, False) and not _events(splits, True):
        unread.append("clock events")
    return "cause not visible" + (f" (not readable here: {', '.join(unread)})" if unread else "")


def _events_cause(splits: Sequence[_Split]) -> list[str]:
    """The slowdowns the device named in at least half of the sustained intervals: its own
    word for the cause, before any sensor's."""
    held = _events(splits, True)
    seen = dict.fromkeys(word for words in held for word in _slowdowns(words))
    named = [(word, sum(word in words for words in held)) for word in seen]
    return [f"{word} ({count}/{len(held)} intervals)" for word, count in named
            if 2 * count >= len(held)]


def _temperature_cause(splits: Sequence[_Split], confidence: float, name: str,
                       label: str) -> list[str]:
    after = _values(splits, name, True)
    sensor = _sensor(splits, name)
    limit = sensor.limit if sensor is not None else None
    if after and limit is not None and float(np.median(after)) >= limit - TEMPERATURE_AT_LIMIT_C:
        return [f"{label} at limit ({np.median(after):.0f} °C, limit {limit:.0f} °C)"]
    rise = _difference_interval(_values(splits, name, False), after, confidence)
    if rise is not None and rise[1] > 0 and rise[0] >= TEMPERATURE_MIN_RISE_C:
        return [f"{label} up {rise[0]:.0f} °C"]
    return []


def _power_cause(splits: Sequence[_Split], confidence: float) -> list[str]:
    after = _values(splits, "power_w", True)
    sensor = _sensor(splits, "power_w")
    cap = sensor.limit if sensor is not None else None
    if after and cap and float(np.median(after)) >= cap * (1 - POWER_AT_CAP):
        return [f"power capped ({np.median(after):.0f} W, cap {cap:.0f} W)"]
    power = log_ratio_interval(_values(splits, "power_w", False), after, confidence)
    if power is not None and power[2] < 1 and 1 - power[0] >= SENSOR_MIN_CHANGE:
        return [f"power down {1 - power[0]:.0%}"]
    return []


@dataclass(frozen=True)
class SustainedRecord(Record):
    """A case's (or a peak's) sustained measurement: the time series and its figures; the
    ``sustained`` field of a case result, and beside the burst peaks in a roofline."""

    series: SustainedSeries
    figures: SustainedFigures
    #: "case", or the peak held: "matmul", "bandwidth".
    kind: str = "case"
    #: A held peak (``roofline --sustained``): the burst figure the roofline stores for it (the
    #: best reading seen, not this run's first intervals), and the sustained rate as a share of
    #: it; None for a case, or where the roofline has no such figure.
    stored_burst: float | None = None
    share_of_stored_burst: float | None = None

    @classmethod
    def judge(cls, series: SustainedSeries, kind: str = "case") -> SustainedRecord:
        return cls(series, sustained_figures(series), kind)

    def beside(self, stored_burst: float | None) -> SustainedRecord:
        """This record held against the stored burst figure ``stored_burst`` (its share)."""
        valid = stored_burst is not None and stored_burst == stored_burst and stored_burst > 0
        burst = stored_burst if valid else None
        sustained = self.figures.sustained
        share = sustained / burst if burst is not None and sustained is not None else None
        return replace(self, stored_burst=burst, share_of_stored_burst=share)

    @classmethod
    def pooled(cls, records: Sequence[SustainedRecord]) -> SustainedRecord:
        """Several processes' records of one case (--repeat N) as one: figures over every
        process's intervals, the first process's series to draw."""
        first = records[0]
        return cls(first.series, sustained_figures([r.series for r in records]), first.kind)
