"""When the timed loop stops, and the constants it measures by: the stop rule (steps, a time budget
with a precision target, epochs, or a sustained run in intervals) belongs to the loop that obeys
it, so ``measure/`` reads no options and the options (``options/``) build it from flags.
Torch-free and numpy-free: parsing arguments imports this."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from accelbench.bounds import MOST_COUNT, MOST_SECONDS, check_number, shown
from accelbench.codec import Codec
from accelbench.errors import UsageError

STOP_KINDS = ("steps", "time", "epochs", "sustained")
DEFAULT_TIME_BUDGET_S = 10.0
#: Under a time budget, at least this many samples are taken whatever the budget.
MIN_SAMPLES = 5
#: On asynchronous devices, steps shorter than this are timed in windows of several steps.
MIN_WINDOW_S = 0.005
#: Under a time budget, measuring stops early once the median's 95% CI is within +-this percent
#: of the median (``--target-ci``; 0 measures the whole budget).
DEFAULT_TARGET_CI_PCT = 2.0
#: --sustained: throughput and sensors are recorded per interval of this many seconds ...
DEFAULT_SUSTAINED_INTERVAL_S = 10.0
#: ... and a run holds at least this many, so the burst (a fifth) has a spread to judge.
MIN_SUSTAINED_INTERVALS = 10


def check_durations(duration_s: float, interval_s: float,
                    min_intervals: int = MIN_SUSTAINED_INTERVALS) -> str:
    """The problem with a sustained duration and interval, in one line; "" when there is none.
    Fewer than ``min_intervals`` intervals leave the burst (a fifth) without a spread to judge."""
    if not (math.isfinite(duration_s) and duration_s > 0):
        return f"the sustained duration must be a positive number of minutes, not {duration_s / 60:g}"
    if not (math.isfinite(interval_s) and interval_s > 0):
        return f"the sustained interval must be a positive number of seconds, not {interval_s:g}"
    if duration_s < min_intervals * interval_s:
        return (f"a sustained run of {duration_s:g} s holds fewer than {min_intervals} intervals of "
                f"{interval_s:g} s; allowed: a duration of at least {min_intervals * interval_s:g} s "
                "or a shorter --sustained-interval")
    return ""


@dataclass(frozen=True)
class StopRule(Codec):
    """When measuring stops: after ``value`` steps or epochs, a time budget of ``value`` seconds,
    or (kind "sustained", ``--sustained MINUTES``) a sustained run of ``value`` seconds recorded
    in intervals of ``interval`` seconds."""

    kind: str = "time"
    value: float = DEFAULT_TIME_BUDGET_S
    #: Percent half-width of the median's CI at which a time budget stops early; None = the
    #: default (DEFAULT_TARGET_CI_PCT under a time budget; no target for the other kinds).
    target_ci: float | None = None
    #: A sustained run's interval in seconds (the other kinds ignore it).
    interval: float = DEFAULT_SUSTAINED_INTERVAL_S

    def __post_init__(self) -> None:
        if self.kind not in STOP_KINDS:
            raise UsageError(f"stop rule {self.kind!r} is unknown; allowed: {STOP_KINDS}")
        flag = {"time": "--time-budget"}.get(self.kind, f"--{self.kind}")
        if self.kind == "sustained":
            # Given in minutes, kept in seconds.
            numeric = isinstance(self.value, int | float) and not isinstance(self.value, bool)
            check_number(flag, self.value / 60 if numeric else self.value,
                         whole=False, zero_ok=False, most=MOST_SECONDS / 60)
            check_number("--sustained-interval", self.interval, whole=False, zero_ok=False,
                         most=MOST_SECONDS)
        else:
            check_number(flag, self.value, whole=False, zero_ok=False,
                         most=MOST_SECONDS if self.kind == "time" else MOST_COUNT)
        # A stored record may say 5.0 steps: a whole float is a whole number here.
        if self.kind in ("steps", "epochs") and int(self.value) != self.value:
            raise UsageError(f"{flag} must be a whole number, got {self.value}")
        if self.target_ci is not None:
            check_number("--target-ci", self.target_ci, whole=False, zero_ok=True)
            if not 0 <= self.target_ci < 100:
                raise UsageError(f"--target-ci must be a percentage from 0 to below 100, got "
                                 f"{shown(self.target_ci)}")
            if self.target_ci and self.kind != "time":
                raise UsageError(f"--target-ci stops a time budget early; it cannot be combined "
                                 f"with --{self.kind}")
        problem = check_durations(self.value, self.interval) if self.kind == "sustained" else ""
        if problem:
            raise UsageError(problem)

    @property
    def target_ci_pct(self) -> float:
        """The effective precision target in percent (0 = none)."""
        if self.target_ci is not None:
            return self.target_ci
        return DEFAULT_TARGET_CI_PCT if self.kind == "time" else 0.0

    def reason_to_stop(self, samples: Sequence[float], elapsed_s: float, check_precision: bool) -> str:
        """Why a time budget ends after ``samples`` (taken in ``elapsed_s`` measured seconds):
        "time budget" once it is spent (with at least MIN_SAMPLES samples), "precision reached"
        where ``check_precision`` (the caller's schedule) and the median's 95% CI lies within
        +-``target_ci_pct``; "" to go on. The one rule the step loop and the generation rounds
        (measure/generation/settle.py) obey."""
        if len(samples) < MIN_SAMPLES:
            return ""
        if elapsed_s >= self.value:
            return "time budget"
        if check_precision and self.target_ci_pct:
            # numpy and scipy: only once samples are judged (parsing arguments imports this module).
            from accelbench.measure.loop.median_ci import relative_median_ci_half_width

            if relative_median_ci_half_width(samples) * 100 <= self.target_ci_pct:
                return "precision reached"
        return ""

    def describe(self) -> str:
        if self.kind == "time":
            target = f", or until the median's CI is within +-{self.target_ci_pct:g}%" \
                if self.target_ci_pct else ""
            return f"time budget {self.value:g} s{target}"
        if self.kind == "sustained":
            return f"sustained {self.value / 60:g} min in {self.interval:g} s intervals"
        return f"{int(self.value)} {self.kind}"

    @property
    def sustained_s(self) -> float:
        """Seconds of a sustained run (0 for the other kinds)."""
        return float(self.value) if self.kind == "sustained" else 0.0
