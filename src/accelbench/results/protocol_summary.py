"""Protocol figures that span several cases: MLPerf Client's overall TTFT and 2nd+ token rate, the
geometric means over its categories (each category a case of its own prompt and output lengths;
the catalogue's ``mlperf_ttft_geomean_s`` and ``mlperf_token_rate_geomean``, results/catalogue.py
ACROSS_CASES). Computed once when a run's cases are in (engine/driver.py) and stored in the
record (``RunRecord.protocol_overall``, results/protocol_overall.py); ``stored_overall`` reads it
(and computes it for a file written before it was stored). ``overall_members`` pairs each stored
group with its cases, for a surface that shows cases one by one (a bundle's lines carry their
group's stored figures), and ``overall_key`` names a group's work as a key (the site's tables).

Cases are grouped by the comparability key without the lengths (the same model, device, precision,
compile, size ...): one overall figure per group, and only where every category of the protocol
finished (MLPerf Client reports no overall score without all of them).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from accelbench.results.generation import ProtocolSection
from accelbench.results.key import KEY_DEFAULTS, KEY_FIELDS, comparability_key
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


def _groups(cases: list[CaseResult]) -> list[list[CaseResult]]:
    """The mlperf-client cases among ``cases``, a list per group, in the order groups first appear."""
    groups: dict[tuple[Any, ...], list[CaseResult]] = {}
    for case in cases:
        if case.mode == "generate" and case.protocol == "mlperf-client":
            groups.setdefault(_group(case), []).append(case)
    return list(groups.values())


def _label(first: CaseResult) -> str:
    return f"{first.workload} {first.precision}" + (f" compile:{first.compile_backend}"
                                                    if first.compile_backend else "")


def mlperf_client_overall(cases: list[CaseResult]) -> list[Overall]:
    """The overall figures of every group of mlperf-client cases among ``cases``."""
    wanted = [t.name for t in protocol("mlperf-client").tests]
    out = []
    for members in _groups(cases):
        found: dict[str, ProtocolSection] = {}
        for case in members:
            section = case.generation.protocol if case.ok and case.generation else None
            if section is not None:
                found[section.scaled_from or section.test] = section
        missing = tuple(name for name in wanted if name not in found)
        ttfts = [found[n].ttft_mean_s for n in wanted if n in found]
        rates = [found[n].token_rate for n in wanted if n in found]
        first = members[0]
        complete = not missing
        out.append(Overall(_label(first), first.device, tuple(n for n in wanted if n in found),
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


def overall_members(record: RunRecord) -> list[tuple[int, Overall, list[CaseResult]]]:
    """Each stored overall group (``stored_overall``: its position in the record, the group) with
    the record's cases it spans, grouped as ``mlperf_client_overall`` groups them: what a surface
    that shows cases one by one (a bundle's lines) needs to carry the stored figure beside the
    cases it is of. A stored group is matched to its cases by its label and device (in order,
    so two groups of one label stay two); a group whose cases are not in the record has none."""
    stored = list(enumerate(stored_overall(record)))
    out = []
    for members in _groups(record.cases):
        first = members[0]
        match = next((item for item in stored
                      if (item[1].label, item[1].device) == (_label(first), first.device)), None)
        if match is not None:
            stored.remove(match)
            out.append((match[0], match[1], members))
    return out


def overall_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A case's comparability key as its overall group's: the prompt and new-token lengths (what
    tells MLPerf Client's categories apart) at their defaults, every other field as it was."""
    return tuple(KEY_DEFAULTS[name] if name in _LENGTHS else value
                 for name, value in zip(KEY_FIELDS, key, strict=True))
