"""``compare --published``: a run's generation cases beside the published batch-1 decode figures
of the same precision (reference/published.py: llama.cpp's Apple-silicon and CUDA tables, gpt-fast,
torchao, PyTorch CI's gpt-fast targets). Tokens/s differ with the model and the device; the figure
comparable across runtimes and machines is the bandwidth share, the bytes read per token x
tokens/s over the device's bandwidth (a decode step reads every weight whatever the runtime: MLX
and llama.cpp read bytes, not magic). Every published row is labelled as such."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.text import Text

from accelbench.reference.published import PUBLISHED_LABEL, DecodeReference, decode_references
from accelbench.render.fit import FittedTable
from accelbench.render.format import format_bytes_rate, format_rate
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import case_figures

COLUMNS = ("whose", "device", "runtime / model", "precision", "test", "tokens/s", "read/s",
           "% bandwidth")


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _mine(case: CaseResult, label: str) -> tuple[str, ...]:
    """A case's row: a --protocol case's own rate (its catalogue headline, as its table shows it)
    and, for gpt-fast, its bandwidth achieved; else the decode rate per sequence (the published
    rows are batch 1) and the decode bandwidth."""
    figures = case_figures(case)
    protocol = (case.generation or {}).get("protocol")
    named = protocol.get("test") if isinstance(protocol, dict) else None
    test = str(named or f"{case.prompt_len}+{case.new_tokens}")
    rate = case.throughput() if case.protocol else figures.get("decode_tokens_per_s")
    own = figures.get("gpt_fast_bandwidth_bytes_per_s") is not None
    read = figures["gpt_fast_bandwidth_bytes_per_s" if own else "decode_bandwidth_bytes_per_s"]
    share = figures["gpt_fast_bandwidth_share" if own else "bandwidth_share"]
    return (f"yours: {label}", case.device_name or case.device, f"accelbench / {case.workload}",
            case.precision, test, format_rate(rate), format_bytes_rate(read), _share(share))


def _published(row: DecodeReference) -> tuple[str, ...]:
    mark = " (derived)" if row.derived else ""
    return ("published", row.device, f"{row.runtime} / {row.model}", row.quantization, row.test,
            format_rate(row.tokens_per_s), format_bytes_rate(row.achieved),
            _share(row.bandwidth_share) + mark)


def published_rows(runs: Sequence[tuple[str, RunRecord]]) -> list[tuple[str, ...]]:
    """The user's finished generation cases, each precision followed by its published rows."""
    rows: list[tuple[str, ...]] = []
    shown: set[str] = set()
    for label, record in runs:
        for case in record.cases:
            if case.mode != "generate" or not case.ok or not case.generation:
                continue
            rows.append(_mine(case, label))
            family = {"fp16": "bf16", "fp32": "bf16", "amp-bf16": "bf16", "amp-fp16": "bf16"}.get(
                case.precision, case.precision)
            if family not in shown:
                shown.add(family)
                rows += [_published(r) for r in decode_references(family)]
    return rows


def published_generation(runs: Sequence[tuple[str, RunRecord]]) -> Group:
    rows = published_rows(runs) if runs else [_published(r) for r in decode_references()]
    table = FittedTable("Generation beside published batch-1 decode (comparable: % of the device's "
                        "bandwidth)", COLUMNS, rows, right=COLUMNS[5:])
    note = Text(f"published: {PUBLISHED_LABEL}; bytes per token x tokens/s over the device's stated "
                "bandwidth (derived: the bandwidth or the model's size derived, see compare "
                "--reference). yours: % of the bandwidth accelbench roofline measured here (n/a: run "
                "accelbench roofline). A quantized decode at 50-70% is healthy (its kernels unpack).",
                style="dim")
    return Group(table, note)
