"""The verdict rule on synthetic per-process figures with planted effects (no benchmark runs).

Each simulated process's figure is log-normal around the configuration's true value with a
between-process spread of 4%, about what the per-process 10th percentiles of a tiny case spread
on the shared 2-core development VM; some tests add processes wrecked by a neighbour, as seen
there. The real-process version of this check is benchmarks/verdicts.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from accelbench.compare.verdict import CANT_TELL, FASTER, SAME, SLOWER, judge, ratio_interval
from accelbench.options import DEFAULT_REPEATS

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


@pytest.mark.parametrize("count", [1, 3])
def test_too_few_processes_are_never_called(count: int) -> None:
    rates = _rate(2.0, count=count)
    assert rates[CANT_TELL] == 1.0


def test_interval_covers_the_true_ratio_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(TRIALS):
        _, low, high = ratio_interval(_processes(rng, 0.1, 6), _processes(rng, 0.08, 6))
        covered += low <= 1.25 <= high
    assert 0.91 <= covered / TRIALS <= 0.99


def test_zero_spread_and_bad_figures() -> None:
    assert judge([0.1] * 4, [0.1] * 4).verdict == SAME
    assert judge([0.1] * 4, [0.05] * 4).verdict == FASTER
    assert judge([0.1] * 3, [0.05] * 3).verdict == CANT_TELL  # 3 vs 3: ranks cannot reach 95%
    assert judge([], [0.1]).verdict == "did not run"
    assert judge([0.1, 0.0], [0.1, 0.1]).verdict == "did not run"


def _contaminated(rng: np.random.Generator, step_s: float, share: float = 0.1,
                  count: int = DEFAULT_REPEATS) -> list[float]:
    """Processes of which ``share`` were slowed 1.2-1.6x as a whole by a neighbour (seen on the VM)."""
    figures = step_s * np.exp(SPREAD * rng.standard_normal(count))
    hit = rng.random(count) < share
    figures[hit] *= rng.uniform(1.2, 1.6, int(hit.sum()))
    return list(figures)


def test_disturbed_processes_hide_a_ten_percent_slowdown_less_than_a_t_interval_did() -> None:
    """With one process in ten slowed by a neighbour, the rank interval still finds a 10% slowdown
    in more than half of the 6-vs-6 comparisons; Welch's t interval on the same figures (the old
    rule) found it in 42%, because one wrecked process blows up the variance."""
    rng = np.random.default_rng(1)
    found = sum(judge(_contaminated(rng, 0.1, count=6), _contaminated(rng, 0.11, count=6)).verdict
                == SLOWER for _ in range(TRIALS))
    assert found / TRIALS >= 0.5


def test_the_default_repeat_count_finds_a_ten_percent_slowdown_among_disturbed_processes() -> None:
    """--repeat alone (DEFAULT_REPEATS a side) reaches the issue's 80% power even with one
    process in ten wrecked by a neighbour; 6 a side did not on the development VM."""
    rng = np.random.default_rng(3)
    found = sum(judge(_contaminated(rng, 0.1), _contaminated(rng, 0.11)).verdict == SLOWER
                for _ in range(TRIALS))
    assert found / TRIALS >= 0.80


def test_disturbed_identical_configurations_are_rarely_called_different() -> None:
    rng = np.random.default_rng(2)
    called = sum(judge(_contaminated(rng, 0.1), _contaminated(rng, 0.1)).called for _ in range(TRIALS))
    assert called / TRIALS <= 0.05


def test_the_per_process_figure_is_the_lower_tail_not_the_median() -> None:
    """A process whose second half a neighbour slowed 2x keeps its figure: that is what makes
    the verdict robust on a shared machine."""
    from accelbench.results.process import process_figure

    steady = [0.010] * 40
    disturbed = [0.010] * 20 + [0.020] * 20
    assert process_figure(disturbed) == pytest.approx(process_figure(steady), rel=0.01)
