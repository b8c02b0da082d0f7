"""Statistics computed on demand from raw samples (the raw samples are always kept).

The median's confidence interval is the distribution-free order-statistic interval of
``measure/median_ci.py`` (the timed loop's stop rule reads it too). The mean's interval (used only
to project totals such as an epoch's time) is Student's t.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from accelbench.measure.median_ci import CONFIDENCE, median_ci

NOISY_REL_IQR = 0.10
#: Differences smaller than this (either way) are noise on the machines accelbench runs on: the
#: verdicts' band (compare/verdict.py), the sustained verdict and the compile break-even use it.
MIN_EFFECT = 0.05
#: Drift: the last quarter of a case's samples is slower than the first by this much, and
#: significantly so (one-sided Mann-Whitney U, p < DRIFT_ALPHA).
DRIFT_MIN_RATIO = 1.05
DRIFT_ALPHA = 0.01
DRIFT_MIN_SAMPLES = 16


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    iqr: float
    mean: float
    std: float
    min: float
    max: float
    median_ci_low: float
    median_ci_high: float
    mean_ci_low: float
    mean_ci_high: float
    confidence: float
    rel_iqr: float
    noisy: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


def mean_ci(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    values = np.asarray(samples, dtype=float)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, mean
    sem = float(values.std(ddof=1)) / math.sqrt(len(values))
    half = float(sps.t.ppf(0.5 + confidence / 2, len(values) - 1)) * sem
    return mean - half, mean + half


def geometric_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student's t interval on the logarithms, mapped back: for per-process figures (one value per
    worker process), whose spread is multiplicative. The full value with fewer than 2 values."""
    logs = np.log(np.asarray(values, dtype=float))
    center = float(logs.mean())
    if len(logs) < 2:
        return math.exp(center), math.exp(center)
    sem = float(logs.std(ddof=1)) / math.sqrt(len(logs))
    half = float(sps.t.ppf(0.5 + confidence / 2, len(logs) - 1)) * sem
    return math.exp(center - half), math.exp(center + half)


def summarize(
    samples: Sequence[float],
    confidence: float = CONFIDENCE,
    noisy_threshold: float = NOISY_REL_IQR,
) -> Summary:
    if len(samples) == 0:
        raise ValueError("summarize needs at least one sample")
    values = np.asarray(samples, dtype=float)
    q1, median, q3 = (float(q) for q in np.percentile(values, [25, 50, 75]))
    low, high = median_ci(values, confidence)
    mean_low, mean_high = mean_ci(values, confidence)
    iqr = q3 - q1
    rel_iqr = iqr / median if median > 0 else 0.0
    return Summary(
        n=len(values),
        median=median,
        q1=q1,
        q3=q3,
        iqr=iqr,
        mean=float(values.mean()),
        std=float(values.std(ddof=1)) if len(values) > 1 else 0.0,
        min=float(values.min()),
        max=float(values.max()),
        median_ci_low=low,
        median_ci_high=high,
        mean_ci_low=mean_low,
        mean_ci_high=mean_high,
        confidence=confidence,
        rel_iqr=rel_iqr,
        noisy=rel_iqr > noisy_threshold,
    )


def drift(samples: Sequence[float]) -> dict[str, Any] | None:
    """Compare the last quarter of the samples with the first (thermal throttling shows as a
    slow-down over the case). None with fewer than DRIFT_MIN_SAMPLES samples."""
    if len(samples) < DRIFT_MIN_SAMPLES:
        return None
    quarter = len(samples) // 4
    first, last = list(samples[:quarter]), list(samples[-quarter:])
    ratio = float(np.median(last) / np.median(first)) if np.median(first) > 0 else 1.0
    p_value = float(sps.mannwhitneyu(last, first, alternative="greater").pvalue)
    return {"ratio": ratio, "p_value": p_value,
            "drifting": ratio >= DRIFT_MIN_RATIO and p_value < DRIFT_ALPHA}
