"""``--json`` views: the stored records (``run``, ``sweep``, ``scale``, ``check``, ``probe``) and
what ``history`` and ``compare`` list and judge, with each case's figures by their catalogue
names (results/catalogue.py), the same values the tables show, so a script reads what the person
read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.compare import MachineRow, Pair, Verdict, WorkloadComparison
from accelbench.compare.decode_diagnosis import DecodeDiagnosis
from accelbench.parity.shown import verdict_of
from accelbench.render.peak_marks import mark_words
from accelbench.render.table import busy_line
from accelbench.results import CaseResult, RunRecord, rate_unit
from accelbench.results.catalogue import case_figures, case_headline, key_headline
from accelbench.results.key import KEY_FIELDS, comparability_key, config_label
from accelbench.results.protocol_summary import stored_overall
from accelbench.store.history import RunSummaryRow, TimelinePoint
from accelbench.store.jsonfile import clean_for_json

if TYPE_CHECKING:
    from accelbench.compare.collection import OverallGroup
    from accelbench.compare.overall_place import OverallPlacement
    from accelbench.compare.peers import PeerComparison
    from accelbench.sharing.sources import Loaded


def dumps(value: Any) -> str:
    return json.dumps(clean_for_json(value), indent=1, allow_nan=False) + "\n"


def case_view(case: CaseResult | None) -> dict[str, Any] | None:
    if case is None:
        return None
    return {"workload": case.workload, "mode": case.mode, "device": case.device,
            "device_name": case.device_name, "status": case.status, "error": case.error,
            "config": config_label(case),
            "key": dict(zip(KEY_FIELDS, comparability_key(case), strict=True)),
            "rate": case.throughput(), "rate_ci": case.throughput_ci(),
            "rate_name": case_headline(case).name, "rate_unit": case.rate_unit(),
            "figures": case_figures(case), "peak_mark": mark_words(case.flops) or None,
            "decode": _decode(DecodeDiagnosis.of_case(case))}


def _decode(diagnosis: DecodeDiagnosis | None) -> dict[str, Any] | None:
    """A generation case's bound, host CPU, execution and kernel, as the tables say them."""
    return diagnosis.to_dict() if diagnosis is not None else None


#: What a case's view adds to the case as stored.
_ADDED = ("config", "key", "rate", "rate_ci", "rate_name", "rate_unit", "figures", "peak_mark", "decode")


def record_view(record: RunRecord) -> dict[str, Any]:
    """A record as stored, each case with what ``case_view`` adds (its configuration words,
    comparability key, headline rate and catalogue figures) and a check case with its verdict;
    ``busy``: the run table's "machine busy" footer where the run began under load."""
    data = record.to_dict()
    for stored, case in zip(data["cases"], record.cases, strict=True):
        view = case_view(case) or {}
        stored.update({name: view[name] for name in _ADDED})
        if record.kind == "check":
            stored["verdict"] = verdict_of(case)
    # The run table's footer, in the same words: a run begun on a busy machine (None otherwise).
    data["busy"] = busy_line(record) or None
    overall = stored_overall(record)
    if overall:  # figures across cases (catalogue ACROSS_CASES), as the lines under the table
        data["protocol_overall"] = [group.to_dict() for group in overall]
    return data


def verdict_view(verdict: Verdict | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    return {"verdict": verdict.verdict, "ratio": verdict.ratio, "ci_low": verdict.low,
            "ci_high": verdict.high, "processes": list(verdict.processes), "reason": verdict.reason,
            "noisy": verdict.noisy}


def _row(row: MachineRow) -> dict[str, Any]:
    return {"run": row.run.label, "machine": row.run.machine, "cpu": case_view(row.cpu),
            "accelerator": case_view(row.accel), "speedup": row.speedup,
            "speedup_verdict": verdict_view(row.speedup_verdict)}


def _pair(pair: Pair) -> dict[str, Any]:
    return {"a": pair.a_label, "b": pair.b_label, "device": pair.b.device,
            "a_case": case_view(pair.a), "b_case": case_view(pair.b),
            "verdict": verdict_view(pair.verdict), "power_note": pair.power_note,
            "settings_note": pair.settings_note}


def comparison_view(comparisons: list[WorkloadComparison]) -> list[dict[str, Any]]:
    """What ``compare`` judged: per workload and mode, the machine rows and every pair, with the
    ratio the table shows (B's rate over A's) and the verdict's interval."""
    return [{"workload": group.workload, "mode": group.mode, "rate_unit": rate_unit(group.mode),
             "rows": [_row(row) for row in group.rows], "pairs": [_pair(pair) for pair in group.pairs]}
            for group in comparisons]


def overall_view(runs: Sequence[tuple[str, RunRecord]]) -> list[dict[str, Any]]:
    """Each run's stored figures across cases (catalogue ACROSS_CASES: MLPerf Client's overall),
    by the catalogue's names, as ``run --json`` shows them, with the run's label."""
    return [{"run": label, **group.to_dict()} for label, record in runs for group in stored_overall(record)]


def comparison_json(comparisons: list[WorkloadComparison],
                    runs: Sequence[tuple[str, RunRecord]] = ()) -> str:
    view: dict[str, Any] = {"comparisons": comparison_view(comparisons)}
    overall = overall_view(runs)
    if overall:
        view["protocol_overall"] = overall
    return dumps(view)


def _placement(comparison: PeerComparison) -> dict[str, Any]:
    placement = comparison.placement
    mine = placement.mine
    key = dict(zip(KEY_FIELDS, mine.key, strict=True))
    return {"run": comparison.run_label, "device": comparison.device, "key": key,
            "config": config_label(key), "rate_unit": key_headline(key).label,
            "device_model": mine.device_model, "rate": mine.throughput,
            "verdict": placement.verdict, "percentile": placement.percentile,
            "ratio_to_median": placement.ratio_to_median, "reasons": list(placement.reasons),
            "note": placement.note, "peers": placement.peer_count,
            "machines": placement.machine_count,
            "own_model": asdict(placement.own) if placement.own else None,
            "models": [asdict(group) for group in placement.groups],
            "invalid": placement.invalid, "invalid_reasons": list(placement.invalid_reasons),
            "outliers": placement.outliers, "outlier_reasons": list(placement.outlier_reasons),
            "set_aside": placement.set_aside, "set_aside_reasons": list(placement.set_aside_reasons),
            "decode": _decode(mine.decode)}


def _overall_group(group: OverallGroup) -> dict[str, Any]:
    """A device model's shared overall figures as the overall table shows them (medians over
    machines of the stored figures, by the catalogue's names; the token rates' band)."""
    band = group.band()
    return {"device_model": group.device_model, "runs": group.groups, "machines": group.machines,
            "categories": group.categories, "mlperf_ttft_geomean_s": group.ttft_s,
            "mlperf_token_rate_geomean": group.token_rate,
            "low": band[0] if band else None, "high": band[1] if band else None}


def _overall_placement(placement: OverallPlacement) -> dict[str, Any]:
    """One stored overall group among the shared ones, as its table shows it."""
    key = dict(zip(KEY_FIELDS, placement.key, strict=True))
    return {"run": placement.run_label, "device": placement.device, "key": key, "config": config_label(key),
            "device_model": placement.device_model, **placement.overall.to_dict(),
            "verdict": placement.verdict, "percentile": placement.percentile,
            "ratio_to_median": placement.ratio_to_median,
            "ttft_ratio_to_median": placement.ttft_ratio_to_median,
            "peers": placement.peer_count, "machines": placement.machine_count,
            "own_model": _overall_group(placement.own) if placement.own else None,
            "models": [_overall_group(group) for group in placement.groups]}


def peers_view(comparisons: list[PeerComparison], loaded: Loaded,
               overall: Sequence[OverallPlacement] = ()) -> dict[str, Any]:
    """What ``--against`` placed and read: each case among its peers (the figures the peers table
    shows: the own device model's group, every model's group, the user's rate, percentile, ratio
    to the median and verdict with its reasons), each stored overall group among the shared ones
    (MLPerf Client's overall: ``overall``, the overall table's figures; empty where none was
    placed), and every line of the sources accounted for."""
    return {"placements": [_placement(comparison) for comparison in comparisons],
            "overall": [_overall_placement(placement) for placement in overall],
            "read": {"sources": list(loaded.sources), "lines": loaded.lines,
                     "skipped": dict(loaded.skipped), "duplicates": loaded.duplicates,
                     "not_bundle": loaded.not_bundle, "shard_files": loaded.shard_files,
                     "shard_rows": loaded.shard_rows, "tables": loaded.tables,
                     "invalid": loaded.invalid, "outliers": loaded.outliers, "conflicts": loaded.conflicts,
                     "other_work": loaded.other_work, "unsigned": loaded.unsigned,
                     "summary": loaded.summary()}}


def _point(point: TimelinePoint, mode: str) -> dict[str, Any]:
    view = asdict(point)
    view["key"] = json.loads(point.config_key) if point.config_key else None
    view["rate_unit"] = key_headline(view["key"]).label if view["key"] else rate_unit(mode)
    return view


def _run(row: RunSummaryRow) -> dict[str, Any]:
    """A stored run as listed, with its stored figures across cases by the catalogue's names, as
    ``run --json``'s ``protocol_overall`` shows them (an empty list where it has none)."""
    return {**asdict(row), "protocol_overall": [group.to_dict() for group in row.protocol_overall]}


def history_json(database: Path, rows: list[RunSummaryRow], points: list[TimelinePoint] | None,
                 mode: str | None) -> str:
    """Stored runs and, with a workload and mode, its timeline: the stored throughput figure."""
    return dumps({"database": str(database), "runs": [_run(row) for row in rows],
                  "timeline": [_point(p, mode or "") for p in points] if points is not None else None})
