"""Statistics computed on demand from raw samples (the raw samples are always kept).

The median's confidence interval is the distribution-free order-statistic interval of
``measure/loop/median_ci.py`` (the timed loop's stop rule reads it too). Every t interval (a mean's,
used only to project totals such as an epoch's time; the per-process figures' geometric one; the
sustained verdict's ratios and differences) is :func:`t_interval`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from accelbench.measure.loop.median_ci import CONFIDENCE, NOISY_REL_IQR, Samples, median_ci, relative_iqr

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


def t_interval(values: Samples, minus: Samples | None = None,
               confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(centre, low, high): Student's t interval of the mean of ``values``; with ``minus``,
    Welch's interval of mean(values) - mean(minus) (unequal variances; Welch-Satterthwaite
    degrees of freedom, which for one sample are its n - 1). The one t interval: the mean's,
    the geometric one (on logarithms) and the sustained verdict's use it. Where there is no
    spread to judge (fewer than 2 values in a sample, or none varies) the interval is the
    centre alone."""
    samples = [np.asarray(values, dtype=float)]
    if minus is not None:
        samples.append(np.asarray(minus, dtype=float))
    centre = float(samples[0].mean()) - (float(samples[1].mean()) if len(samples) > 1 else 0.0)
    if any(len(sample) < 2 for sample in samples):
        return centre, centre, centre
    # Each sample's squared standard error of its mean.
    squared = [float(sample.var(ddof=1)) / len(sample) for sample in samples]
    se = math.sqrt(sum(squared))
    if se == 0:
        return centre, centre, centre
    df = sum(squared) ** 2 / sum(part ** 2 / (len(sample) - 1)
                                 for part, sample in zip(squared, samples, strict=True))
    from scipy import stats as sps  # scipy takes ~0.7 s to import: only when it is needed

    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * se
    return centre, centre - half, centre + half


def wider_than_figure(value: float, low: float, high: float) -> bool:
    """Whether a figure's interval reaches further from it than the figure itself (a side wider
    than 100% of it): such a figure is noise, not a measurement, and is said so, never as ±%."""
    return max(value - low, high - value) > value


def mean_ci(samples: Samples, confidence: float = CONFIDENCE) -> tuple[float, float]:
    _, low, high = t_interval(samples, confidence=confidence)
    return low, high


def geometric_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student's t interval on the logarithms, mapped back: for per-process figures (one value per
    worker process), whose spread is multiplicative. The full value with fewer than 2 values."""
    _, low, high = t_interval(np.log(np.asarray(values, dtype=float)), confidence=confidence)
    return math.exp(low), math.exp(high)


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
    rel_iqr = relative_iqr(values)
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
    from scipy import stats as sps

    p_value = float(sps.mannwhitneyu(last, first, alternative="greater").pvalue)
    return {"ratio": ratio, "p_value": p_value,
            "drifting": ratio >= DRIFT_MIN_RATIO and p_value < DRIFT_ALPHA}
