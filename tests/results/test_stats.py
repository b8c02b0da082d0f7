from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.measure.loop.median_ci import median_ci
from accelbench.results.stats import mean_ci, summarize


def test_summary_of_known_samples() -> None:
    s = summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert s.n == 10
    assert s.median == 5.5
    assert (s.q1, s.q3) == (3.25, 7.75)
    assert s.iqr == pytest.approx(4.5)
    assert s.mean == 5.5
    assert s.std == pytest.approx(np.std(range(1, 11), ddof=1))
    # Order-statistic 95% interval for n=10 is (x_(2), x_(9)): coverage 97.9%.
    assert (s.median_ci_low, s.median_ci_high) == (2.0, 9.0)
    assert s.noisy


def test_median_ci_matches_the_binomial_table_for_100() -> None:
    assert median_ci(list(range(1, 101))) == (40.0, 61.0)


def test_few_samples_give_the_full_range() -> None:
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)


def test_steady_samples_are_not_noisy_and_spread_is_flagged() -> None:
    steady = summarize([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0])
    assert not steady.noisy and steady.rel_iqr < 0.05
    spread = summarize([1.0, 1.5, 0.7, 1.3, 0.8, 1.6, 0.9])
    assert spread.noisy and spread.rel_iqr > 0.10


def test_mean_ci_is_student_t() -> None:
    low, high = mean_ci([1.0, 2.0, 3.0])
    # mean 2, sd 1, sem 1/sqrt(3), t(0.975, 2) = 4.3027
    assert low == pytest.approx(2 - 4.302653 / np.sqrt(3), rel=1e-5)
    assert high == pytest.approx(2 + 4.302653 / np.sqrt(3), rel=1e-5)


def test_empty_samples_are_rejected() -> None:
    with pytest.raises(ValueError):
        summarize([])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=1e-6, max_value=1e3, allow_nan=False), min_size=1, max_size=300))
def test_median_interval_always_holds_the_median(samples: list[float]) -> None:
    s = summarize(samples)
    assert s.min <= s.median_ci_low <= s.median <= s.median_ci_high <= s.max
    assert s.q1 <= s.median <= s.q3


def test_drift_flags_a_slowing_case_only() -> None:
    from accelbench.results.stats import drift

    slowing = drift([1.0 + 0.001 * (i % 3) for i in range(30)] + [1.15 + 0.001 * (i % 3) for i in range(10)])
    assert slowing is not None and slowing["drifting"] and slowing["ratio"] > 1.1
    steady = drift([1.0 + 0.01 * ((i * 7) % 5) for i in range(40)])
    assert steady is not None and not steady["drifting"]
    faster = drift([1.2] * 20 + [1.0] * 20)
    assert faster is not None and not faster["drifting"]
    assert drift([1.0] * 10) is None


def test_geometric_ci_covers_the_spread_of_process_figures() -> None:
    from accelbench.results.stats import geometric_ci

    assert geometric_ci([0.1]) == pytest.approx((0.1, 0.1))
    low, high = geometric_ci([0.09, 0.10, 0.11])
    assert low < 0.09 < 0.11 < high
    assert (low * high) ** 0.5 == pytest.approx((0.09 * 0.10 * 0.11) ** (1 / 3))  # centred on the GM


# Issue 27, "The loop owns its stop rule": the three t-interval helpers become one. mean_ci,
# geometric_ci and the sustained verdict's Welch intervals (results/sustained.py) each computed
# a t half-width themselves; all go through stats.t_interval now, held to scipy's own tests.
BEFORE, AFTER = [9.8, 10.1, 10.4, 9.9, 10.2], [8.7, 9.6, 9.1, 8.2]


def test_one_t_interval_is_students_for_one_sample_and_welchs_for_two() -> None:
    from scipy import stats as sps

    from accelbench.results.stats import t_interval

    centre, low, high = t_interval(AFTER)
    expected = sps.ttest_1samp(AFTER, 0.0).confidence_interval(0.95)
    assert centre == pytest.approx(np.mean(AFTER))
    assert (low, high) == pytest.approx((expected.low, expected.high))
    centre, low, high = t_interval(AFTER, BEFORE, confidence=0.9)
    expected = sps.ttest_ind(AFTER, BEFORE, equal_var=False).confidence_interval(0.9)
    assert centre == pytest.approx(np.mean(AFTER) - np.mean(BEFORE))
    assert (low, high) == pytest.approx((expected.low, expected.high))
    # No spread to judge: the centre alone.
    assert t_interval([4.0]) == (4.0, 4.0, 4.0)
    assert t_interval([2.0, 2.0], [1.0, 1.0, 1.0]) == (1.0, 1.0, 1.0)


def test_every_t_interval_is_the_one() -> None:
    from accelbench.results.stats import geometric_ci, t_interval
    from accelbench.results.sustained import _difference_interval, log_ratio_interval

    assert mean_ci(AFTER) == t_interval(AFTER)[1:]
    logs = np.log(AFTER)
    assert geometric_ci(AFTER) == pytest.approx(tuple(np.exp(t_interval(logs)[1:])))
    assert log_ratio_interval(BEFORE, AFTER) == pytest.approx(
        tuple(np.exp(t_interval(logs, np.log(BEFORE)))))
    assert _difference_interval(BEFORE, AFTER) == t_interval(AFTER, BEFORE)
