"""Number formatting shared by every renderer, and the word for what a rate counts."""

from __future__ import annotations

from collections.abc import Iterable

from accelbench.results import CaseResult, rate_unit
from accelbench.results.catalogue import max_of
from accelbench.results.generation import Generation
from accelbench.results.stats import wider_than_figure


def rate_label(cases: Iterable[CaseResult]) -> str:
    """What a column of ``CaseResult.throughput()`` counts: samples/s, or decode tokens/s (over
    the batch) for generation, or both words where the cases mix the two."""
    units = sorted({rate_unit(case.mode) for case in cases}, key=lambda unit: unit != "samples/s")
    return " | ".join(units) if units else "samples/s"


def with_rate_label(headers: tuple[str, ...], cases: Iterable[CaseResult]) -> tuple[str, ...]:
    """``headers`` with their "samples/s" column named for what ``cases`` count (``rate_label``)."""
    label = rate_label(cases)
    return tuple(label if header == "samples/s" else header for header in headers)


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{seconds / 60:.1f} min"


def format_tail(generation: Generation, name: str) -> str:
    """A generation case's tail figure (``ttft_p99_s`` ...) in seconds, led by "max of N:" where
    its values were too few for the percentile (results/catalogue.max_of), so it never reads as
    one."""
    value = getattr(generation, name)  # a tail field: ttft_p90_s, ttft_p99_s, tpot_p99_s, itl_p99_s
    text = format_seconds(value)
    stated = max_of(generation, name) if value is not None else ""
    return f"{stated}: {text}" if stated else text


def format_range(interval: tuple[float, float] | None) -> str:
    """A figure's 95% interval as its two ends ("4.2–19,300"); "n/a" where there is none."""
    return f"{format_rate(interval[0])}–{format_rate(interval[1])}" if interval else "n/a"


def format_interval(value: float, low: float, high: float) -> str:
    """A figure's 95% interval beside it: "±2.1%" (the wider side: the interval is asymmetric),
    or where the interval is wider than the figure itself, "noise: 4.2–19,300": a ±% above 100%
    reads as a figure with error bars, and such a figure is noise, not a measurement."""
    if wider_than_figure(value, low, high):
        return f"noise: {format_range((low, high))}"
    return f"±{max(value - low, high - value) / value * 100:.1f}%"


def format_rate(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def format_bytes_rate(bytes_per_s: float | None) -> str:
    """Decimal units, as bandwidths are quoted (1 GB/s = 1e9 bytes/s)."""
    if bytes_per_s is None:
        return "n/a"
    for unit, scale in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bytes_per_s >= scale:
            return f"{bytes_per_s / scale:.3g} {unit}"
    return f"{bytes_per_s:.3g} B/s"
