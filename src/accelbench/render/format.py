"""Number formatting shared by every renderer, and the word for what a rate counts."""

from __future__ import annotations

from collections.abc import Iterable

from accelbench.results import CaseResult, rate_unit


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
