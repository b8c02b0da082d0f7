"""``compare --published``: a run's generation cases beside the published batch-1 decode figures
of the same precision (reference/published.py: llama.cpp's Apple-silicon and CUDA tables, gpt-fast,
torchao, PyTorch CI's gpt-fast targets). Tokens/s differ with the model and the device; the figure
comparable across runtimes and machines is the bandwidth share, the bytes read per token x
tokens/s over the device's bandwidth (a decode step reads every weight whatever the runtime: MLX
and llama.cpp read bytes, not magic). Every published row is labelled as such.

Every row says how it executed. The published PyTorch rows compiled the decode step with CUDA
graphs (gpt-fast's recipe; int8 as inductor's fused dequantise-and-multiply); a case of yours that
ran otherwise (eager, no graphs captured, overhead-bound, PyTorch's reference int8 kernel: the
reasons of compare/decode_diagnosis.unlike_published) is still shown, its rate is yours, but its
own line says it is not that recipe and why, so "8% of bandwidth" beside "57%" reads as the host's
launches, never as a slow GPU. Shown rather than left out: the figure is the user's, and the gap
to the published row is what the words explain."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group

from accelbench.compare.decode_diagnosis import DecodeDiagnosis
from accelbench.reference.published import PUBLISHED_LABEL, DecodeReference, decode_references
from accelbench.render.fit import FittedTable, Prose
from accelbench.render.format import format_bytes_rate, format_rate
from accelbench.render.generation_detail import OVERALL_COLUMNS, overall_rows
from accelbench.render.json_views import overall_view
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import case_figures

COLUMNS = ("whose", "device", "runtime / model", "precision", "test", "tokens/s", "read/s",
           "% bandwidth", "execution · decode bound")
#: The family of published rows each precision is set beside.
_FAMILY = {"fp16": "bf16", "fp32": "bf16", "amp-bf16": "bf16", "amp-fp16": "bf16"}


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _family(precision: str) -> str:
    return _FAMILY.get(precision, precision)


def execution_cell(case: CaseResult) -> str:
    """How the case executed and the bound its decode hit; where the published rows of its
    precision include compiled CUDA-graph rows and the case is not that recipe, says so first."""
    diagnosis = DecodeDiagnosis.of_case(case) or DecodeDiagnosis()
    recipe = diagnosis.recipe_words() or (f"compile:{case.compile_backend}" if case.compile_backend else "")
    unlike = diagnosis.unlike_published()
    if unlike and any(row.cuda_graphs for row in decode_references(_family(case.precision))):
        return "; ".join(w for w in (recipe, "NOT the published rows' recipe (compiled, CUDA graphs): "
                                     + "; ".join(unlike)) if w)
    return "; ".join(w for w in (recipe, diagnosis.bound_words) if w)


def _mine(case: CaseResult, label: str) -> tuple[str, ...]:
    """A case's row: a --protocol case's own rate (its catalogue headline, as its table shows it)
    and, for gpt-fast, its bandwidth achieved; else the decode rate per sequence (the published
    rows are batch 1) and the decode bandwidth."""
    figures = case_figures(case)
    protocol = case.generation.protocol if case.generation else None
    named = protocol.test if protocol is not None else None
    test = str(named or f"{case.prompt_len}+{case.new_tokens}")
    rate = case.throughput() if case.protocol else figures.get("decode_tokens_per_s")
    own = figures.get("gpt_fast_bandwidth_bytes_per_s") is not None
    read = figures["gpt_fast_bandwidth_bytes_per_s" if own else "decode_bandwidth_bytes_per_s"]
    share = figures["gpt_fast_bandwidth_share" if own else "bandwidth_share"]
    return (f"yours: {label}", case.device_name or case.device, f"accelbench / {case.workload}",
            case.precision, test,
            format_rate(rate), format_bytes_rate(read), _share(share), execution_cell(case))


def _published(row: DecodeReference) -> tuple[str, ...]:
    mark = " (derived)" if row.derived else ""
    return ("published", row.device, f"{row.runtime} / {row.model}", row.quantization, row.test,
            format_rate(row.tokens_per_s), format_bytes_rate(row.achieved),
            _share(row.bandwidth_share) + mark, row.execution)


def _generation_cases(runs: Sequence[tuple[str, RunRecord]]) -> list[tuple[str, CaseResult]]:
    return [(label, case) for label, record in runs for case in record.cases
            if case.mode == "generate" and case.ok and case.generation]


def published_rows(runs: Sequence[tuple[str, RunRecord]]) -> list[tuple[str, ...]]:
    """The user's finished generation cases, each precision followed by its published rows."""
    rows: list[tuple[str, ...]] = []
    shown: set[str] = set()
    for label, case in _generation_cases(runs):
        rows.append(_mine(case, label))
        family = _family(case.precision)
        if family not in shown:
            shown.add(family)
            rows += [_published(r) for r in decode_references(family)]
    return rows


def published_view(runs: Sequence[tuple[str, RunRecord]]) -> dict[str, Any]:
    """``compare --published --json``: the table's rows by column, each of yours with its decode
    diagnosis and the reasons it is not the published recipe (empty where it is)."""
    rows = published_rows(runs) if runs else [_published(r) for r in decode_references()]
    views: list[dict[str, Any]] = [dict(zip(COLUMNS, row, strict=True)) for row in rows]
    mine = iter(_generation_cases(runs))
    for view in views:
        if view["whose"] != "published":
            _, case = next(mine)
            diagnosis = DecodeDiagnosis.of_case(case)
            view["decode"] = diagnosis.to_dict() if diagnosis else None
            view["unlike_published"] = (diagnosis or DecodeDiagnosis()).unlike_published()
    out: dict[str, Any] = {"published": views}
    overall = overall_view(runs)
    if overall:  # figures across cases, as each run stores them (MLPerf Client's overall)
        out["protocol_overall"] = overall
    return out


def published_generation(runs: Sequence[tuple[str, RunRecord]]) -> Group:
    rows = published_rows(runs) if runs else [_published(r) for r in decode_references()]
    table = FittedTable("Generation beside published batch-1 decode (comparable: % of the device's "
                        "bandwidth)", COLUMNS, rows, right=COLUMNS[5:8], stack=("whose", "device"))
    note = Prose(f"published: {PUBLISHED_LABEL}; bytes per token x tokens/s over the device's stated "
                "bandwidth (derived: the bandwidth or the model's size derived, see compare "
                "--reference). yours: % of the bandwidth accelbench roofline measured here (n/a: run "
                "accelbench roofline). A quantized decode at 50-70% is healthy (its kernels unpack). "
                "A decode over 3x its bandwidth floor is overhead-bound: it measured the host's kernel "
                "launches, not the device, and is no match for a compiled CUDA-graph row.", "dim")
    overall = overall_rows(runs)
    if not overall:
        return Group(table, note)
    # Figures across cases, as each run stores them (MLPerf Client's overall; no published row).
    return Group(table, note, FittedTable("Protocol figures across cases (stored with each run)",
                                          OVERALL_COLUMNS, overall, right=OVERALL_COLUMNS[2:]))
