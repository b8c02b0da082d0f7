"""The verdict rule: is B faster than A, judged across independent processes.

The unit of comparison is one worker process. The step times of one process are not independent
draws of "this machine's speed": they share the process's memory layout, thread placement, clock
state and neighbours, and the process-to-process variation (about +-10% on a shared VM) is what
a user sees when they run again. So each process gives one figure, its median step time, and only
the spread between processes decides.

The model: log(per-process median step time) is normal around the configuration's true value,
with a between-process variance that may differ between A and B. The ratio B/A of throughputs is
exp(mean log A - mean log B) (a ratio of geometric means), and its 95% interval is Welch's t
interval on the logs, with Welch-Satterthwaite degrees of freedom. We chose this over a bootstrap
over processes because with the 2-5 processes a side that users will run, a bootstrap's percentile
interval is far too narrow (three values have only ten distinct resamples), while the t interval
widens honestly as processes get few.

The rule, with a noise band of +-MIN_EFFECT (5%):
  * fewer than MIN_PROCESSES (2) processes on either side: "can't tell" (one process a side can
    never be called: it says nothing about the between-process spread);
  * the interval excludes 1 and the ratio is outside the noise band: "faster" or "slower";
  * the whole interval lies inside the noise band: "same within noise";
  * anything else: "can't tell" (more processes would narrow the interval).
The false-positive rate is at most 5% (the interval's miss rate), less with the minimum effect;
``benchmarks/verdicts.py`` measures both it and the power to find a planted 10% difference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95
#: Differences smaller than this (either way) are noise on the machines accelbench runs on.
MIN_EFFECT = 0.05
MIN_PROCESSES = 2

FASTER, SLOWER, SAME, CANT_TELL, NOT_COMPARABLE, NOT_RUN = (
    "faster", "slower", "same within noise", "can't tell", "not comparable", "did not run")


@dataclass(frozen=True)
class Verdict:
    """B against A: ``ratio`` = B's throughput / A's (> 1: B is faster), with its interval."""

    verdict: str
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    processes: tuple[int, int] = (0, 0)
    reason: str = ""
    noisy: bool = False

    @property
    def called(self) -> bool:
        return self.verdict in (FASTER, SLOWER)


def ratio_interval(a: Sequence[float], b: Sequence[float],
                   confidence: float = CONFIDENCE) -> tuple[float, float | None, float | None]:
    """(ratio, low, high) of B's throughput over A's from per-process step times (seconds).

    low/high are None when either side has fewer than two processes (no spread to estimate)."""
    log_a, log_b = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    diff = float(log_a.mean() - log_b.mean())
    if len(log_a) < 2 or len(log_b) < 2:
        return math.exp(diff), None, None
    var_a, var_b = log_a.var(ddof=1) / len(log_a), log_b.var(ddof=1) / len(log_b)
    se = math.sqrt(var_a + var_b)
    if se == 0.0:
        return math.exp(diff), math.exp(diff), math.exp(diff)
    dof = (var_a + var_b) ** 2 / (var_a ** 2 / (len(log_a) - 1) + var_b ** 2 / (len(log_b) - 1))
    half = float(sps.t.ppf(0.5 + confidence / 2, dof)) * se
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half)


def judge(a: Sequence[float], b: Sequence[float], min_effect: float = MIN_EFFECT,
          confidence: float = CONFIDENCE, noisy: bool = False) -> Verdict:
    """The verdict on B against A from their per-process step times; see the module docstring."""
    if not len(a) or not len(b):
        return Verdict(NOT_RUN, reason="no timed samples")
    if any(value <= 0 for value in (*a, *b)):
        return Verdict(NOT_RUN, reason="a process reported a step time of 0")
    processes = (len(a), len(b))
    ratio, low, high = ratio_interval(a, b, confidence)
    if low is None or high is None:
        return Verdict(CANT_TELL, ratio, processes=processes, noisy=noisy,
                       reason="one process a side says nothing about the spread between runs; "
                              "measure with --repeat")
    band_low, band_high = 1 / (1 + min_effect), 1 + min_effect
    if low > 1 and ratio >= band_high:
        return Verdict(FASTER, ratio, low, high, processes, noisy=noisy)
    if high < 1 and ratio <= band_low:
        return Verdict(SLOWER, ratio, low, high, processes, noisy=noisy)
    if band_low <= low and high <= band_high:
        return Verdict(SAME, ratio, low, high, processes, noisy=noisy)
    return Verdict(CANT_TELL, ratio, low, high, processes, noisy=noisy,
                   reason=f"the interval is wider than the +-{min_effect:.0%} noise band; "
                          "more processes (--repeat) would narrow it")


def interval_text(verdict: Verdict) -> str:
    a, b = verdict.processes
    processes = f"{a} vs {b} process{'es' if max(a, b) > 1 else ''}"
    if verdict.low is None or verdict.high is None:
        return processes
    return f"95% CI {verdict.low:.2f}–{verdict.high:.2f}, {processes}"


def describe(verdict: Verdict) -> str:
    """A verdict as a short phrase: "1.32x faster (95% CI 1.25–1.40, 5 vs 5 processes)"."""
    noisy = ", noisy" if verdict.noisy else ""
    if verdict.verdict in (NOT_COMPARABLE, NOT_RUN):
        return f"{verdict.verdict}: {verdict.reason}"
    ratio = verdict.ratio or 0.0
    if verdict.verdict == FASTER:
        return f"{ratio:.2f}x faster ({interval_text(verdict)}{noisy})"
    if verdict.verdict == SLOWER:
        return f"{1 / ratio:.2f}x slower ({interval_text(verdict)}{noisy})"
    if verdict.verdict == SAME:
        return f"same within noise ({ratio:.2f}x, {interval_text(verdict)}{noisy})"
    return f"can't tell ({ratio:.2f}x, {interval_text(verdict)}{noisy}): {verdict.reason}"
