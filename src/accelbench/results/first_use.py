"""The costs a user pays before the steady state, and when compiling pays for itself.

Pure figures over fields every case already records (``measure/timing.py``'s Timing: the time to
the first step, the warm-up's steps and seconds, the steady step times), so they live beside the
other records and can be worked out again from a stored result:

* **compile time**: the first compiled steps (the warm-up) less the same number of steady
  compiled steps: what ``torch.compile`` (and any recompilation the warm-up met) cost;
* **first-use cost** of a device: the first step less a steady step (MPS compiles its shaders,
  cuDNN autotunes, kernels load on first use); only meaningful in a fresh process;
* **compile break-even**: with a compiled and an uncompiled case of the same work, "compile pays
  off after N steps" = compile time / time saved per step. The saving's interval comes from a
  bootstrap of the two cases' step samples (medians); when it includes 0, or the compiled step is
  faster by less than the verdicts' noise band, compiling "never pays off": noise must not make
  up a break-even point. The interval is within one process a side (the step samples); whether
  the saving holds across processes is ``compare``'s question.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.measure.median_ci import CONFIDENCE, median_ci
from accelbench.measure.timing import Timing
from accelbench.results.stats import MIN_EFFECT

#: Bootstrap resamples of the step samples for the break-even's interval (seeded: the same
#: samples give the same interval).
RESAMPLES = 2000
#: Resampled rows per batch (bounds the memory a bootstrap of long runs takes).
_BATCH = 200


@dataclass(frozen=True)
class Cost:
    """Seconds the first ``steps`` steps took beyond as many steady steps, with the interval that
    the steady median's order-statistic interval gives."""

    seconds: float
    low: float
    high: float
    steps: int

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "low": self.low, "high": self.high, "steps": self.steps}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cost:
        return cls(float(data["seconds"]), float(data["low"]), float(data["high"]), int(data["steps"]))


def extra_cost(first_s: float | None, first_steps: int, steady: Sequence[float],
               confidence: float = CONFIDENCE) -> Cost | None:
    """``first_s`` (seconds of the first ``first_steps`` steps) less ``first_steps`` steady steps
    (the median of ``steady``); None when either is missing."""
    if first_s is None or first_steps <= 0 or not len(steady):
        return None
    median = float(np.median(np.asarray(steady, dtype=float)))
    low, high = median_ci(steady, confidence)
    return Cost(first_s - first_steps * median, first_s - first_steps * high,
                first_s - first_steps * low, first_steps)


def compile_time(timing: Timing, confidence: float = CONFIDENCE) -> Cost | None:
    """A compiled case's compile time: its warm-up less as many steady steps."""
    return extra_cost(timing.warmup_time_s, timing.warmup_steps, timing.step_times, confidence)


def first_use_cost(timing: Timing, confidence: float = CONFIDENCE) -> Cost | None:
    """A case's first step less a steady step (a device's first-use cost, in a fresh process)."""
    return extra_cost(timing.time_to_first_step_s, 1, timing.step_times, confidence)


def _bootstrap_medians(samples: Sequence[float], resamples: int, rng: np.random.Generator) -> np.ndarray:
    values = np.asarray(samples, dtype=float)
    medians = []
    for start in range(0, resamples, _BATCH):
        rows = min(_BATCH, resamples - start)
        medians.append(np.median(rng.choice(values, size=(rows, len(values)), replace=True), axis=1))
    return np.concatenate(medians)


@dataclass(frozen=True)
class BreakEven:
    """When compiling pays for itself: after ``steps`` steps (with its interval), or never."""

    pays_off: bool
    steps: float | None
    low: float | None
    high: float | None
    compile_s: float
    #: Seconds saved per step (uncompiled median less compiled median) and its interval.
    saving_s: float
    saving_low: float
    saving_high: float
    #: Uncompiled step time / compiled step time (> 1: the compiled step is faster).
    speedup: float
    confidence: float
    reason: str = ""

    def describe(self) -> str:
        """"compile pays off after 1,200 steps (95% CI 1,100–1,350)", or why it never does."""
        if self.pays_off and self.steps is not None:
            if self.steps == 0:
                return "compile pays off from the first step (no compile time measured)"
            interval = (f" ({self.confidence:.0%} CI {math.ceil(self.low or 0):,}–"
                        f"{math.ceil(self.high or 0):,})" if self.low is not None else "")
            return f"compile pays off after {math.ceil(self.steps):,} steps{interval}"
        return f"compile never pays off: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BreakEven:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


def break_even(compile_s: float, compiled: Sequence[float], uncompiled: Sequence[float],
               confidence: float = CONFIDENCE, min_effect: float = MIN_EFFECT,
               resamples: int = RESAMPLES, seed: int = 0) -> BreakEven:
    """After how many steps the compiled case has made up its compile time against the
    uncompiled one, from both cases' step times (seconds per step) and the compile time."""
    if not len(compiled) or not len(uncompiled):
        raise ValueError("break_even needs step samples of both cases")
    rng = np.random.default_rng(seed)
    savings = _bootstrap_medians(uncompiled, resamples, rng) - _bootstrap_medians(compiled, resamples, rng)
    alpha = (1 - confidence) / 2
    saving_low, saving_high = (float(q) for q in np.quantile(savings, [alpha, 1 - alpha]))
    compiled_median = float(np.median(np.asarray(compiled, dtype=float)))
    uncompiled_median = float(np.median(np.asarray(uncompiled, dtype=float)))
    saving = uncompiled_median - compiled_median
    speedup = uncompiled_median / compiled_median if compiled_median > 0 else math.inf
    never = BreakEven(False, None, None, None, compile_s, saving, saving_low, saving_high, speedup,
                      confidence)
    saved = (f"{saving * 1e3:+.3g} ms a step, {confidence:.0%} CI {saving_low * 1e3:+.3g} to "
             f"{saving_high * 1e3:+.3g} ms")
    if saving_low <= 0:
        return _with_reason(never, f"the compiled step is not faster beyond noise ({saved})")
    if speedup < 1 + min_effect:
        return _with_reason(never, f"the compiled step is {speedup - 1:.1%} faster, inside the "
                                   f"+-{min_effect:.0%} noise band ({saved})")
    if compile_s <= 0:
        return BreakEven(True, 0.0, 0.0, 0.0, compile_s, saving, saving_low, saving_high, speedup,
                         confidence)
    # The saving's interval maps onto the steps' (steps fall as the saving grows).
    return BreakEven(True, compile_s / saving, compile_s / saving_high, compile_s / saving_low,
                     compile_s, saving, saving_low, saving_high, speedup, confidence)


def _with_reason(figure: BreakEven, reason: str) -> BreakEven:
    return BreakEven(**{**figure.to_dict(), "reason": reason})


@dataclass(frozen=True)
class FirstUse:
    """A case's costs before its steady state: the time to its first step and its warm-up as
    recorded, and the compile time (compiled cases) or the first-use cost (uncompiled ones)."""

    time_to_first_step_s: float | None
    warmup_s: float | None
    warmup_steps: int
    compile: Cost | None = None
    first_use: Cost | None = None

    @classmethod
    def of(cls, timing: Timing, compiled: bool) -> FirstUse:
        return cls(timing.time_to_first_step_s, timing.warmup_time_s, timing.warmup_steps,
                   compile_time(timing) if compiled else None,
                   None if compiled else first_use_cost(timing))

    def to_dict(self) -> dict[str, Any]:
        return {"time_to_first_step_s": self.time_to_first_step_s, "warmup_s": self.warmup_s,
                "warmup_steps": self.warmup_steps,
                "compile": self.compile.to_dict() if self.compile else None,
                "first_use": self.first_use.to_dict() if self.first_use else None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FirstUse:
        return cls(data.get("time_to_first_step_s"), data.get("warmup_s"), int(data.get("warmup_steps", 0)),
                   Cost.from_dict(data["compile"]) if data.get("compile") else None,
                   Cost.from_dict(data["first_use"]) if data.get("first_use") else None)
