"""The verdict rule: is B faster than A, judged across independent processes.

The unit of comparison is one worker process. The step times of one process are not independent
draws of "this machine's speed": they share the process's memory layout, thread placement, clock
state and neighbours, and the process-to-process variation (about +-10% on a shared VM) is what
a user sees when they run again. So each process gives one figure and only the spread between
processes decides. The figure is the process's 10th-percentile step time (repeat.process_figure):
on a shared machine interference only ever adds time, and a process hit by a neighbour for part
of its run keeps its undisturbed steps in its lower tail (measured: per-process medians of 10 ms
steps ranged up to 25 ms while their 10th percentiles stayed within a few percent).

The ratio B/A of throughputs is the Hodges-Lehmann estimate: the median of the ratios of every
A process's figure to every B process's. Its 95% interval is the distribution-free one that
inverts the exact Mann-Whitney test (the k-th smallest and largest of those pairwise ratios), so
its coverage holds whatever the distribution, and one process wrecked by a neighbour moves it
by one rank instead of blowing up a variance. We chose this over Welch's t interval on the logs
(the rule before) because on this machine a few disturbed processes per pool made the t interval
so wide that a real 10% difference was found in under 60% of 5-vs-5 comparisons
(docs/performance.md (c)), and over a bootstrap because with a handful of processes a side a
bootstrap's percentile interval is far too narrow. The cost: ranks cannot reach 95% with fewer
than 4 processes a side (3 vs 3 has only 20 orderings), so such comparisons are "can't tell".

The rule, with a noise band of +-MIN_EFFECT (5%):
  * too few processes for a 95% interval (1 a side always; 3 vs 3): "can't tell";
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
from functools import lru_cache

import numpy as np

from accelbench.results.stats import MIN_EFFECT

CONFIDENCE = 0.95
#: Above this many processes in all, the Mann-Whitney count is close enough to normal.
EXACT_LIMIT = 60

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


@lru_cache(maxsize=256)
def _u_counts(n: int, m: int) -> tuple[int, ...]:
    """How many of the C(n+m, n) orderings give each Mann-Whitney count U = 0..n*m."""
    # counts[j][u] for a side of size i (built up) against j: f(i, j) = f(i-1, j) shifted by j + f(i, j-1)
    table = [[1] for _ in range(m + 1)]  # i = 0: U is 0 whatever j
    for i in range(1, n + 1):
        row = [[1]]  # j = 0
        for j in range(1, m + 1):
            left, below = table[j], row[j - 1]  # f(i-1, j), f(i, j-1)
            size = i * j + 1
            counts = [0] * size
            for u, c in enumerate(left):
                counts[u + j] += c
            for u, c in enumerate(below):
                counts[u] += c
            row.append(counts)
        table = row
    return tuple(table[m])


def _rank_depth(n: int, m: int, confidence: float) -> int:
    """k: the interval runs from the k-th smallest to the k-th largest pairwise ratio; 0 = none
    reaches the confidence (too few processes)."""
    alpha = (1 - confidence) / 2
    if n + m > EXACT_LIMIT:
        centre, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
        from scipy import stats as sps  # scipy takes ~0.7 s to import: only when it is needed

        return max(0, int(math.floor(centre - float(sps.norm.ppf(1 - alpha)) * sd)))
    counts = _u_counts(n, m)
    total, below, depth = sum(counts), 0, 0
    for u, count in enumerate(counts):
        below += count
        if below / total > alpha:
            break
        depth = u + 1  # P(U <= u) <= alpha: the (u+1)-th smallest difference may bound the interval
    return depth


def ratio_interval(a: Sequence[float], b: Sequence[float],
                   confidence: float = CONFIDENCE) -> tuple[float, float | None, float | None]:
    """(ratio, low, high) of B's throughput over A's from per-process step times (seconds).

    low/high are None when there are too few processes for an interval at this confidence."""
    log_a, log_b = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    pairwise = np.sort((log_a[:, None] - log_b[None, :]).ravel())
    ratio = math.exp(float(np.median(pairwise)))
    depth = _rank_depth(len(log_a), len(log_b), confidence)
    if depth == 0:
        return ratio, None, None
    return ratio, math.exp(float(pairwise[depth - 1])), math.exp(float(pairwise[-depth]))


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
        reason = ("one process a side says nothing about the spread between runs; measure with "
                  "--repeat" if min(processes) < 2 else
                  f"{processes[0]} vs {processes[1]} processes are too few for a 95% interval; "
                  "use --repeat 4 or more")
        return Verdict(CANT_TELL, ratio, processes=processes, noisy=noisy, reason=reason)
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
