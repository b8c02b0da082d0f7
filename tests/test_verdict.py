"""The verdict rule on synthetic per-process figures with planted effects (no benchmark runs).

Each simulated process's median step time is log-normal around the configuration's true value
with a between-process spread of 4%, about what per-process medians of a tiny case spread on the
shared 2-core development VM. The real-process version of this check is benchmarks/verdicts.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from accelbench.compare.verdict import CANT_TELL, FASTER, SAME, SLOWER, judge, ratio_interval
from accelbench.repeat import DEFAULT_REPEATS

SPREAD = 0.04
TRIALS = 400


def _processes(rng: np.random.Generator, step_s: float, count: int) -> list[float]:
    return list(step_s * np.exp(SPREAD * rng.standard_normal(count)))


def _rate(slowdown: float, count: int = DEFAULT_REPEATS, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    verdicts = [judge(_processes(rng, 0.1, count), _processes(rng, 0.1 * slowdown, count)).verdict
                for _ in range(TRIALS)]
    return {name: verdicts.count(name) / TRIALS for name in (FASTER, SLOWER, SAME, CANT_TELL)}


def test_identical_configurations_are_rarely_called_different() -> None:
    rates = _rate(1.0)
    assert rates[FASTER] + rates[SLOWER] <= 0.05


def test_a_planted_ten_percent_slowdown_is_found() -> None:
    rates = _rate(1.10)
    assert rates[SLOWER] >= 0.80 and rates[FASTER] == 0.0


def test_a_planted_speedup_is_called_faster_not_slower() -> None:
    rates = _rate(1 / 1.10)
    assert rates[FASTER] >= 0.80 and rates[SLOWER] == 0.0


@pytest.mark.parametrize("count", [1])
def test_single_processes_are_never_called(count: int) -> None:
    rates = _rate(2.0, count=count)
    assert rates[CANT_TELL] == 1.0


def test_interval_covers_the_true_ratio_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(TRIALS):
        _, low, high = ratio_interval(_processes(rng, 0.1, 3), _processes(rng, 0.08, 3))
        covered += low <= 1.25 <= high
    assert 0.91 <= covered / TRIALS <= 0.99


def test_zero_spread_and_bad_figures() -> None:
    assert judge([0.1, 0.1], [0.1, 0.1]).verdict == SAME
    assert judge([0.1, 0.1], [0.05, 0.05]).verdict == FASTER
    assert judge([], [0.1]).verdict == "did not run"
    assert judge([0.1, 0.0], [0.1, 0.1]).verdict == "did not run"
