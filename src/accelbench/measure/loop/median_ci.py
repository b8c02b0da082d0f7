"""How precise a median is: the order-statistic confidence interval behind the timed loop's stop
rule (``--target-ci``) and every summary (``results/stats.py``).

The interval is distribution-free: ranks chosen from the Binomial(n, 1/2) distribution, so it holds
for any step-time distribution (step times are skewed, with a long tail of slow steps, so a normal
interval would be wrong).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95
#: Samples whose interquartile range is more than this share of their median are flagged noisy
#: (a step case's samples, a generation case's rounds): results/stats.py and the rounds read it.
NOISY_REL_IQR = 0.10
#: What the statistics read: the samples as a sequence of floats, or already as an array.
Samples = Sequence[float] | np.ndarray


def median_ci(samples: Samples, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Order-statistic confidence interval of the median (exact, distribution-free).

    With fewer than 6 samples no pair of ranks reaches 95% coverage; the interval is then the
    full range, which is the widest honest answer.
    """
    ordered = np.sort(np.asarray(samples, dtype=float))
    n = len(ordered)
    if n == 0:
        raise ValueError("median_ci needs at least one sample")
    alpha = 1.0 - confidence
    # Largest j with P(Binom(n, .5) < j) <= alpha/2: the interval is [x_(j), x_(n-j+1)] (1-based).
    # scipy takes ~0.7 s to import (every --help paid it): only when an interval is needed.
    from scipy import stats as sps

    j = int(sps.binom.ppf(alpha / 2, n, 0.5))
    if sps.binom.cdf(j - 1, n, 0.5) > alpha / 2:
        j -= 1
    j = max(j, 1)
    return float(ordered[j - 1]), float(ordered[n - j])


def relative_median_ci_half_width(samples: Samples,
                                  confidence: float = CONFIDENCE) -> float:
    """The precision of the median: the larger distance from the median to an end of its
    confidence interval, as a fraction of the median (the interval is asymmetric; the larger
    side is the honest "+-"). Infinite for a non-positive median."""
    values = np.asarray(samples, dtype=float)
    if len(values) == 0:
        raise ValueError("relative_median_ci_half_width needs at least one sample")
    median = float(np.median(values))
    if median <= 0:
        return math.inf
    low, high = median_ci(values, confidence)
    return max(median - low, high - median) / median


def relative_iqr(samples: Samples) -> float:
    """The spread of the samples: their interquartile range over their median (0 for a
    non-positive median); above NOISY_REL_IQR they are noisy."""
    values = np.asarray(samples, dtype=float)
    if len(values) == 0:
        raise ValueError("relative_iqr needs at least one sample")
    q1, median, q3 = (float(q) for q in np.percentile(values, [25, 50, 75]))
    return (q3 - q1) / median if median > 0 else 0.0
