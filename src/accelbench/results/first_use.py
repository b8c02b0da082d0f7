"""The costs a user pays before the steady state, and when compiling pays for itself.

Pure figures over fields every case already records (``measure/loop/timing.py``'s Timing: the time to
the first step, the warm-up's steps and seconds, the steady step times; a generation case's
``generation`` rounds, the warm-up rounds among them), so they live beside the other records and
can be worked out again from a stored result. The unit is a step, or for a generation case one
whole generation (prefill and every decode step of one round): a generation's first token is
its prefill, not a first-use cost, so the first use is the first round against a steady one.

* **compile time**: the first compiled steps (the warm-up) less the same number of steady
  compiled steps: what ``torch.compile`` (and any recompilation the warm-up met) cost;
* **first-use cost** of a device: the first step less a steady step (MPS compiles its shaders,
  cuDNN autotunes, kernels load on first use); only meaningful in a fresh process, so a case
  that ran after another in its process is marked warm (:class:`Start`);
* **compile break-even**: with a compiled and an uncompiled case of the same work, "compile pays
  off after N steps" = compile time / time saved per step. The compile time charged is the
  compiled warm-up's excess less the uncompiled warm-up's own (first-use costs both sides pay:
  cuDNN autotuning, lazy loading, shader compiles). The saving's interval comes from a
  bootstrap of the two cases' step samples (medians); when it includes 0, or the compiled step
  is faster by less than the verdicts' noise band, compiling "never pays off": noise must not
  make up a break-even point. The interval is within one process a side (the step samples);
  whether the saving holds across processes is ``compare``'s question.

Compile time depends on torch.compile's on-disk caches: the engine compiles each case into a
fresh, empty cache folder and records the caches' switches and lookups (:class:`Start`), so a
compile that hit a cache says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from accelbench.measure.loop.median_ci import CONFIDENCE, median_ci
from accelbench.measure.loop.timing import Timing
from accelbench.results.generation import Generation, Round
from accelbench.results.stats import MIN_EFFECT
from accelbench.results.validate import Record

#: Bootstrap resamples of the step samples for the break-even's interval (seeded: the same
#: samples give the same interval).
RESAMPLES = 2000
#: Resampled rows per batch (bounds the memory a bootstrap of long runs takes).
_BATCH = 200
#: The units of the figures: a training or eval step, or one whole generation (prefill and decode).
STEP, GENERATION = "step", "generation"
#: ``Start.compile_cache`` of a case compiled into an empty cache folder made for it.
FRESH_CACHE = "fresh"


def plural(unit: str, count: float = 2) -> str:
    return unit if count == 1 else f"{unit}s"


@dataclass(frozen=True)
class Start(Record):
    """How a case began, which its first-use figures depend on: whether it was the first case
    of its process (a later one finds the device initialised, kernels loaded, torch.compile
    imported: "warm"), and for a compiled case where the compile caches were, which were on,
    and how many lookups hit."""

    #: Cases run earlier in the same process (0: the first; its first-use figures are cold).
    cases_before: int = 0
    #: Compiled cases: FRESH_CACHE (an empty temporary folder made for the case, removed after
    #: it), or where the caches were; "" for a case that was not compiled.
    compile_cache: str = ""
    #: The cache switches in force (inductor's FX graph and autotune caches, AOTAutograd's, the
    #: remote ones, force_disable_caches); None where this torch has no such switch.
    caches: dict[str, bool | None] = field(default_factory=dict)
    #: Cache lookups during the case (torch's counters: fxgraph_cache_hit, autograd_cache_miss...).
    cache_lookups: dict[str, int] = field(default_factory=dict)
    #: Written for a reader of the file (``to_dict``), not fields: expected when read back.
    JSON_EXTRA: ClassVar[tuple[str, ...]] = ("warm", "cold_compile")

    @property
    def warm(self) -> bool:
        return self.cases_before > 0

    @property
    def cache_hits(self) -> int:
        return sum(count for name, count in self.cache_lookups.items() if name.endswith("_hit"))

    @property
    def cold_compile(self) -> bool | None:
        """A compile in a fresh process, into an empty cache folder, that hit no cache; None for
        a case that was not compiled."""
        if not self.compile_cache:
            return None
        return not self.warm and self.compile_cache == FRESH_CACHE and not self.cache_hits

    def caveat(self) -> str:
        """Why the first-use figures are not a cold start's, in words; "" when they are."""
        parts = []
        if self.warm:
            parts.append(f"warm: {self.cases_before} case{'s' * (self.cases_before != 1)} ran "
                         "before it in its process")
        if self.compile_cache and self.compile_cache != FRESH_CACHE:
            parts.append(f"compile caches in {self.compile_cache}")
        if self.cache_hits:
            parts.append(f"{self.cache_hits} compile cache hit{'s' * (self.cache_hits != 1)}")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The fields, and what they say (``warm``, ``cold_compile``: written for a reader of the
        file, skipped when it is read back)."""
        return {"cases_before": self.cases_before, "warm": self.warm,
                "compile_cache": self.compile_cache, "caches": dict(self.caches),
                "cache_lookups": dict(self.cache_lookups), "cold_compile": self.cold_compile}


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


@dataclass(frozen=True)
class Phases:
    """A case's timing in its unit: the steady samples, the warm-up (total and count) and the
    first one, all in seconds per ``unit``."""

    unit: str
    steady: list[float]
    warmup_s: float | None
    warmup_count: int
    first_s: float | None


def _round_seconds(rounds: Sequence[Round]) -> list[float]:
    return [r.ttft_s + r.decode_s for r in rounds]


def phases(timing: Timing, generation: Generation | None = None) -> Phases:
    """Steps for a training or eval case; whole rounds for a generation case (its ``generation``
    figures): each round's time to first token plus its decode. A generation record written
    before the warm-up rounds were kept has no warm-up here (its first use is unknown)."""
    if generation is None or generation.rounds is None:
        return Phases(STEP, list(timing.step_times), timing.warmup_time_s, timing.warmup_steps,
                      timing.time_to_first_step_s)
    warm = _round_seconds(generation.warmup or ())
    return Phases(GENERATION, _round_seconds(generation.rounds), sum(warm) if warm else None,
                  len(warm), warm[0] if warm else None)


def warmup_excess(timing: Timing, generation: Generation | None = None,
                  confidence: float = CONFIDENCE) -> Cost | None:
    """The warm-up less as many steady steps (or rounds): a compiled case's compile time, an
    uncompiled one's first-use costs over its whole warm-up."""
    found = phases(timing, generation)
    return extra_cost(found.warmup_s, found.warmup_count, found.steady, confidence)


def compile_time(timing: Timing, confidence: float = CONFIDENCE,
                 generation: Generation | None = None) -> Cost | None:
    """A compiled case's compile time: its warm-up less as many steady steps (or rounds)."""
    return warmup_excess(timing, generation, confidence)


def first_use_cost(timing: Timing, confidence: float = CONFIDENCE,
                   generation: Generation | None = None) -> Cost | None:
    """A case's first step (or generation) less a steady one (a device's first-use cost, in a
    fresh process)."""
    found = phases(timing, generation)
    return extra_cost(found.first_s, 1, found.steady, confidence)


def _bootstrap_medians(samples: Sequence[float], resamples: int, rng: np.random.Generator) -> np.ndarray:
    values = np.asarray(samples, dtype=float)
    medians = []
    for start in range(0, resamples, _BATCH):
        rows = min(_BATCH, resamples - start)
        medians.append(np.median(rng.choice(values, size=(rows, len(values)), replace=True), axis=1))
    return np.concatenate(medians)


@dataclass(frozen=True)
class BreakEven(Record):
    """When compiling pays for itself: after ``steps`` steps (or generations, ``unit``) with its
    interval, or never."""

    pays_off: bool
    steps: float | None
    low: float | None
    high: float | None
    #: The compile time: the compiled warm-up less as many steady steps (FirstUse.compile's).
    compile_s: float
    #: Seconds saved per step (uncompiled median less compiled median) and its interval.
    saving_s: float
    saving_low: float
    saving_high: float
    #: Uncompiled step time / compiled step time (> 1: the compiled step is faster).
    speedup: float
    confidence: float
    reason: str = ""
    unit: str = STEP
    #: The uncompiled warm-up's own excess over its steady steps (first-use costs both sides
    #: pay: cuDNN autotuning, lazy loading, shader compiles), and the compile time charged to the
    #: break-even: ``compile_s`` less it (never below 0). None: not recorded (an older result).
    uncompiled_warmup_s: float | None = None
    charged_s: float | None = None
    #: Why the compile time is not a cold start's (Start.caveat of either side); "" when cold.
    caveat: str = ""

    def describe(self) -> str:
        """"compile pays off after 1,200 steps (95% CI 1,100–1,350)", or why it never does."""
        note = f" [{self.caveat}]" if self.caveat else ""
        if self.pays_off and self.steps is not None:
            if self.steps == 0:
                return f"compile pays off from the first {self.unit} (no compile time measured){note}"
            interval = (f" ({self.confidence:.0%} CI {math.ceil(self.low or 0):,}–"
                        f"{math.ceil(self.high or 0):,})" if self.low is not None else "")
            count = math.ceil(self.steps)
            return f"compile pays off after {count:,} {plural(self.unit, count)}{interval}{note}"
        return f"compile never pays off: {self.reason}{note}"


def break_even(compile_s: float, compiled: Sequence[float], uncompiled: Sequence[float],
               confidence: float = CONFIDENCE, min_effect: float = MIN_EFFECT,
               resamples: int = RESAMPLES, seed: int = 0, *, uncompiled_warmup_s: float | None = None,
               unit: str = STEP, caveat: str = "") -> BreakEven:
    """After how many steps the compiled case has made up its compile time against the
    uncompiled one, from both cases' step times (seconds per step) and the compile time
    ``compile_s`` less ``uncompiled_warmup_s`` (the uncompiled warm-up's own excess: first-use
    costs that are not the compile's)."""
    if not len(compiled) or not len(uncompiled):
        raise ValueError("break_even needs step samples of both cases")
    compile_s = max(compile_s, 0.0)
    charged = max(compile_s - max(uncompiled_warmup_s or 0.0, 0.0), 0.0)
    rng = np.random.default_rng(seed)
    savings = _bootstrap_medians(uncompiled, resamples, rng) - _bootstrap_medians(compiled, resamples, rng)
    alpha = (1 - confidence) / 2
    saving_low, saving_high = (float(q) for q in np.quantile(savings, [alpha, 1 - alpha]))
    compiled_median = float(np.median(np.asarray(compiled, dtype=float)))
    uncompiled_median = float(np.median(np.asarray(uncompiled, dtype=float)))
    saving = uncompiled_median - compiled_median
    speedup = uncompiled_median / compiled_median if compiled_median > 0 else math.inf
    never = BreakEven(False, None, None, None, compile_s, saving, saving_low, saving_high, speedup,
                      confidence, "", unit, uncompiled_warmup_s, charged, caveat)
    per = f"a {unit}"
    saved = (f"{saving * 1e3:+.3g} ms {per}, {confidence:.0%} CI {saving_low * 1e3:+.3g} to "
             f"{saving_high * 1e3:+.3g} ms")
    if saving_low <= 0:
        return replace(never, reason=f"the compiled {unit} is not faster beyond noise ({saved})")
    if speedup < 1 + min_effect:
        return replace(never, reason=f"the compiled {unit} is {speedup - 1:.1%} faster, inside the "
                                     f"+-{min_effect:.0%} noise band ({saved})")
    if charged <= 0:
        return replace(never, pays_off=True, steps=0.0, low=0.0, high=0.0)
    # The saving's interval maps onto the steps' (steps fall as the saving grows).
    return replace(never, pays_off=True, steps=charged / saving, low=charged / saving_high,
                   high=charged / saving_low)



@dataclass(frozen=True)
class FirstUse:
    """A case's costs before its steady state: the time to its first step (or generation) and
    its warm-up as recorded, the compile time (compiled cases) or the first-use cost (uncompiled
    ones), and whether the case started cold."""

    time_to_first_step_s: float | None
    warmup_s: float | None
    warmup_steps: int
    compile: Cost | None = None
    first_use: Cost | None = None
    unit: str = STEP
    #: A case ran before it in its process (None: not recorded, a result from before).
    warm: bool | None = None
    #: Compiled: a fresh process, an empty cache folder, no cache hit (None: not compiled or
    #: not recorded).
    cold_compile: bool | None = None
    #: Why these are not a cold start's figures, in words; "" when they are (or not recorded).
    caveat: str = ""

    @classmethod
    def of(cls, timing: Timing, compiled: bool, generation: Generation | None = None,
           start: Start | None = None) -> FirstUse:
        found = phases(timing, generation)
        return cls(found.first_s, found.warmup_s, found.warmup_count,
                   compile_time(timing, generation=generation) if compiled else None,
                   None if compiled else first_use_cost(timing, generation=generation),
                   found.unit, start.warm if start else None,
                   start.cold_compile if start else None, start.caveat() if start else "")

    def to_dict(self) -> dict[str, Any]:
        return {"time_to_first_step_s": self.time_to_first_step_s, "warmup_s": self.warmup_s,
                "warmup_steps": self.warmup_steps,
                "compile": self.compile.to_dict() if self.compile else None,
                "first_use": self.first_use.to_dict() if self.first_use else None,
                "unit": self.unit, "warm": self.warm, "cold_compile": self.cold_compile,
                "caveat": self.caveat}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FirstUse:
        return cls(data.get("time_to_first_step_s"), data.get("warmup_s"), int(data.get("warmup_steps", 0)),
                   Cost.from_dict(data["compile"]) if data.get("compile") else None,
                   Cost.from_dict(data["first_use"]) if data.get("first_use") else None,
                   str(data.get("unit", STEP)), data.get("warm"), data.get("cold_compile"),
                   str(data.get("caveat", "")))
