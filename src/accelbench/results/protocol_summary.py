"""Protocol figures that span several cases: MLPerf Client's overall TTFT and 2nd+ token rate, the
geometric means over its categories (each category a case of its own prompt and output lengths;
the catalogue's ``mlperf_ttft_geomean_s`` and ``mlperf_token_rate_geomean``, results/catalogue.py
ACROSS_CASES). Computed once when a run's cases are in (engine/driver.py) and stored in the
record (``RunRecord.protocol_overall``, results/protocol_overall.py); ``stored_overall`` reads it
(and computes it for a file written before it was stored).

Cases are grouped by the comparability key without the lengths (the same model, device, precision,
compile, size ...): one overall figure per group, and only where every category of the protocol
finished (MLPerf Client reports no overall score without all of them).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from accelbench.results.generation import ProtocolSection
from accelbench.results.key import KEY_FIELDS, comparability_key
from accelbench.results.protocol_overall import Overall
from accelbench.results.records import CaseResult, RunRecord
from accelbench.workloads.protocols import protocol

_LENGTHS = ("prompt_len", "new_tokens")


def geometric_mean(values: list[float]) -> float | None:
    """None unless every value is a positive finite number."""
    if not values or not all(v > 0 and math.isfinite(v) for v in values):
        return None
    return math.exp(statistics.fmean(math.log(v) for v in values))


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
        found: dict[str, ProtocolSection] = {}
        for case in members:
            section = case.generation.protocol if case.ok and case.generation else None
            if section is not None:
                found[section.scaled_from or section.test] = section
        missing = tuple(name for name in wanted if name not in found)
        ttfts = [found[n].ttft_mean_s for n in wanted if n in found]
        rates = [found[n].token_rate for n in wanted if n in found]
        first = members[0]
        label = f"{first.workload} {first.precision}" + (f" compile:{first.compile_backend}"
                                                           if first.compile_backend else "")
        complete = not missing
        out.append(Overall(label, first.device, tuple(n for n in wanted if n in found),
                           geometric_mean([float(v) for v in ttfts if v]) if complete else None,
                           geometric_mean([float(v) for v in rates if v]) if complete else None,
                           missing))
    return out


def stored_overall(record: RunRecord) -> list[Overall]:
    """The record's stored overall figures; a record written before they were stored (no
    ``protocol_overall`` key) has them computed from its cases, as when they are stored."""
    if record.protocol_overall is not None:
        return list(record.protocol_overall)
    return mlperf_client_overall(record.cases)
