"""Protocol figures that span several cases: MLPerf Client's overall TTFT and 2nd+ token rate, the
geometric means over its categories (each category a case of its own prompt and output lengths;
the catalogue's ``mlperf_ttft_geomean_s`` and ``mlperf_token_rate_geomean``, results/catalogue.py
ACROSS_CASES); and the interval of a protocol case's rate.

Cases are grouped by the comparability key without the lengths (the same model, device, precision,
compile, size ...): one overall figure per group, and only where every category of the protocol
finished (MLPerf Client reports no overall score without all of them).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelbench.results.key import KEY_FIELDS, comparability_key
from accelbench.results.records import CaseResult
from accelbench.results.stats import mean_ci
from accelbench.workloads.protocols import protocol

_LENGTHS = ("prompt_len", "new_tokens")


def geometric_mean(values: list[float]) -> float | None:
    """None unless every value is a positive finite number."""
    if not values or not all(v > 0 and math.isfinite(v) for v in values):
        return None
    return math.exp(statistics.fmean(math.log(v) for v in values))


@dataclass(frozen=True)
class Overall:
    """One group's overall figures (None where a category is missing)."""

    label: str
    device: str
    categories: tuple[str, ...]
    ttft_s: float | None
    token_rate: float | None
    missing: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """By the catalogue's names (``--json``)."""
        return {"protocol": "mlperf-client", "label": self.label, "device": self.device,
                "categories": list(self.categories), "mlperf_ttft_geomean_s": self.ttft_s,
                "mlperf_token_rate_geomean": self.token_rate, "missing": list(self.missing)}


def _group(case: CaseResult) -> tuple[Any, ...]:
    key = comparability_key(case)
    return (case.device, *(v for name, v in zip(KEY_FIELDS, key, strict=True) if name not in _LENGTHS))


def mlperf_client_overall(cases: list[CaseResult]) -> list[Overall]:
    """The overall figures of every group of mlperf-client cases among ``cases``."""
    wanted = [t.name for t in protocol("mlperf-client").tests]
    groups: dict[tuple[Any, ...], list[CaseResult]] = {}
    for case in cases:
        if case.mode == "generate" and case.protocol == "mlperf-client":
            groups.setdefault(_group(case), []).append(case)
    out = []
    for members in groups.values():
        found: dict[str, dict[str, Any]] = {}
        for case in members:
            section = (case.generation or {}).get("protocol") if case.ok else None
            if isinstance(section, dict):
                found[str(section.get("scaled_from") or section.get("test"))] = section
        missing = tuple(name for name in wanted if name not in found)
        ttfts = [found[n].get("ttft_mean_s") for n in wanted if n in found]
        rates = [found[n].get("token_rate") for n in wanted if n in found]
        first = members[0]
        label = f"{first.workload} {first.precision}" + (f" compile:{first.compile_backend}"
                                                           if first.compile_backend else "")
        complete = not missing
        out.append(Overall(label, first.device, tuple(n for n in wanted if n in found),
                           geometric_mean([float(v) for v in ttfts if v]) if complete else None,
                           geometric_mean([float(v) for v in rates if v]) if complete else None,
                           missing))
    return out


def protocol_rate_ci(generation: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """The 95% interval of a --protocol case's rate (its catalogue headline), of the statistic it
    is: the mean of the per-repetition rates (llama-bench, gpt-fast), or 1 / the mean of the
    iterations' time per token after the first (MLPerf Client's 2nd+ token rate). None with fewer
    than two rounds, or a section without them."""
    section = (generation or {}).get("protocol")
    if not isinstance(section, Mapping):
        return None
    if section.get("figure") == "category":
        rounds, new_tokens = (generation or {}).get("rounds"), (generation or {}).get("new_tokens")
        if not isinstance(rounds, list) or not isinstance(new_tokens, int) or new_tokens < 2:
            return None
        tpots = [float(r["decode_s"]) / (new_tokens - 1) for r in rounds if isinstance(r, Mapping)]
        if len(tpots) < 2:
            return None
        low, high = mean_ci(tpots)
        return (1.0 / high, 1.0 / low) if low > 0 else None
    samples = section.get("samples_tokens_per_s")
    if not isinstance(samples, list) or len(samples) < 2:
        return None
    low, high = mean_ci([float(v) for v in samples])
    return (max(low, 0.0), high) if high > 0 else None
