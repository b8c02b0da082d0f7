"""How many generation rounds are timed, and when the figures have settled.

A fixed count (``--steps N``, a ``--protocol``'s own repetitions) times exactly that many rounds
after the warm-up rounds asked for. A time budget (``--time-budget``, ``--target-ci``, the tiny
size's default) governs rounds as it governs steps, by the step loop's own rule
(``StopRule.reason_to_stop``): rounds until the median TPOT's 95% interval lies within the target
or the budget is spent, at least MIN_SAMPLES rounds, each round checked (a round is long beside
the check, and from 5 rounds the interval is the full range, so no early stop is premature).
Under a time budget the warm-up also runs until two rounds in a row agree (a compiled decode
step can recompile in its second round; a first use can take more than one), so the timed rounds
start in the steady state: at least two rounds, at most MAX_WARMUP_ROUNDS, and past the first no
longer than the budget itself.

The percentiles of few values are their maximum in disguise: a q-th percentile means something
only where at least one value lies above it, 100 / (100 - q) values (p90: 10, p99: 100); below
that the figure is the maximum and is named "max of N" (:func:`tail`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from accelbench.errors import UsageError
from accelbench.measure.loop.median_ci import NOISY_REL_IQR
from accelbench.measure.loop.stop import MIN_SAMPLES, StopRule

#: Warm-up rounds under a time budget end once two in a row take times within this share of
#: each other (the same share that flags a case noisy) ...
WARMUP_AGREEMENT = NOISY_REL_IQR
#: ... or after this many, whatever they say (a round that never settles is noise to report,
#: not a reason to warm up for ever).
MAX_WARMUP_ROUNDS = 5
#: The stop reasons a generation section records besides the step loop's ("time budget",
#: "precision reached"): a fixed count ran out.
FIXED_COUNT = "rounds"


@dataclass(frozen=True)
class RoundRule:
    """How many rounds: ``count`` exactly (with ``warmup`` warm-up rounds), or where ``budget``
    is given (``count`` 0), rounds until its rule stops them (at least MIN_SAMPLES), after at
    least ``warmup`` warm-up rounds and until two agree (none where ``warmup`` is 0)."""

    count: int = 3
    warmup: int = 1
    budget: StopRule | None = None

    def __post_init__(self) -> None:
        if self.budget is not None and (self.budget.kind != "time" or self.count):
            raise UsageError(f"generation rounds follow a time budget or a count, not a "
                             f"{self.budget.kind!r} rule with {self.count} rounds")
        if (self.budget is None and self.count < 1) or self.warmup < 0:
            raise UsageError(f"rounds must be at least 1 (not {self.count}), warm-up rounds at "
                             f"least 0 (not {self.warmup})")

    def describe(self) -> str:
        """The rule in words: what the result's ``stop_rule`` says."""
        if self.budget is None:
            return f"{self.count} generation rounds"
        warm = ", warm-up until two agree" if self.warmup else ""
        return (f"{self.budget.describe().replace('the median', 'the median TPOT')}; at least "
                f"{MIN_SAMPLES} generation rounds{warm}")

    def warmed_up(self, seconds: Sequence[float]) -> bool:
        """Whether the warm-up rounds so far (each one's whole time) are enough."""
        done = len(seconds)
        if done < self.warmup:
            return False
        if self.budget is None or not self.warmup or done >= MAX_WARMUP_ROUNDS:
            return True
        # Past the first round (a first use, a compile), the warm-up spends at most the budget
        # the rounds get: a tiny case's half second is not spent many times over warming up.
        return done >= 2 and (agree(seconds[-2], seconds[-1]) or sum(seconds[1:]) >= self.budget.value)

    def stop_reason(self, figures: Sequence[float], elapsed_s: float) -> str:
        """Why the timed rounds stop after these (each round's median figure: its TPOT, taken
        in ``elapsed_s`` measured seconds); "" to time another."""
        if self.budget is None:
            return FIXED_COUNT if len(figures) >= self.count else ""
        return self.budget.reason_to_stop(figures, elapsed_s, check_precision=True)


class Timed(Protocol):
    """A round's two times (generation_clocks.GenerationRound)."""

    @property
    def ttft_s(self) -> float: ...

    @property
    def decode_s(self) -> float: ...


def round_figures(rounds: Sequence[Timed], decode_steps: int) -> list[float]:
    """What the rounds settle on: each round's TPOT (decode time / (N - 1)), or its TTFT where
    there is no decode step."""
    return [r.decode_s / decode_steps if decode_steps else r.ttft_s for r in rounds]


def agree(first_s: float, second_s: float) -> bool:
    """Two rounds agree: their times differ by at most WARMUP_AGREEMENT of the longer."""
    return abs(first_s - second_s) <= WARMUP_AGREEMENT * max(first_s, second_s)


def tail_min_values(q: float) -> int:
    """How many values a q-th percentile needs to mean something: one value above it at least."""
    return math.ceil(100 / (100 - q) - 1e-9)


def tail(values: Sequence[float], q: float) -> tuple[float, str]:
    """(the q-th percentile, "p99 of N"), or below tail_min_values (the maximum, "max of N")."""
    if len(values) >= tail_min_values(q):
        return percentile(values, q), f"p{q:g} of {len(values)}"
    return max(values), f"max of {len(values)}"


def tail_statistics(ttfts: Sequence[float], tpots: Sequence[float],
                    token_gaps: Sequence[float]) -> dict[str, str]:
    """What each tail figure of a case is, by its name: "p99 of 120", or "max of 12" where the
    values are too few for the percentile; every surface shows these words. A figure without
    values (no decode step, no per-token times) has none."""
    found = {"ttft_p90_s": tail(ttfts, 90)[1], "ttft_p99_s": tail(ttfts, 99)[1]}
    if tpots:
        found["tpot_p99_s"] = tail(tpots, 99)[1]
    if token_gaps:
        found["itl_p99_s"] = tail(token_gaps, 99)[1]
    return found


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), interpolated between closest ranks (numpy's default)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


__all__ = ["FIXED_COUNT", "MAX_WARMUP_ROUNDS", "NOISY_REL_IQR", "RoundRule", "agree", "percentile",
           "round_figures", "tail", "tail_min_values", "tail_statistics"]
