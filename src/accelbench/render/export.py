"""A stored run as JSON (re-loadable by ``load_record``), CSV (one row per case), Markdown, or the
PyTorch HUD benchmark format (one record per metric, ``hud.py``)."""

from __future__ import annotations

import csv
import io
import json

from accelbench.render.format import rate_label
from accelbench.render.peak_marks import PEAK_COLUMNS, mark_words, peak_rows
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import FIGURES
from accelbench.results.catalogue import case_figures as catalogue_figures
from accelbench.store.jsonfile import clean_for_json

FORMATS = ("json", "csv", "markdown", "hud")

CSV_COLUMNS = (
    "run_id", "created_at", "machine", "workload", "workload_version", "mode", "device", "device_name",
    "precision", "batch_size", "data", "size", "status", "error", "samples", "median_step_s",
    "iqr_step_s", "rel_iqr", "noisy", "throughput_samples_per_s", "throughput_ci_low",
    "throughput_ci_high", "epoch_time_s", "epoch_time_kind", "peak_memory_bytes", "throughput_unit",
)
#: Then every catalogue figure by its name (results/catalogue.py), empty where the case has none,
#: and what the peak behind fraction_of_peak was (render/peak_marks.py: "" where nothing marks it).
CSV_COLUMNS += (*(f.name for f in FIGURES if f.name not in CSV_COLUMNS), "peak_mark")


def to_json(record: RunRecord) -> str:
    # The same text save_record writes, so the export is a result file like any other.
    return json.dumps(clean_for_json(record.to_dict()), indent=1) + "\n"


def case_figures(record: RunRecord, case: CaseResult) -> dict[str, object]:
    summary = case.summary()
    ci = case.throughput_ci()
    epoch = case.epoch_time()
    machine = record.environment.get("machine", {})
    return {
        "run_id": record.run_id, "created_at": record.created_at,
        "machine": machine.get("hostname", "") if isinstance(machine, dict) else "",
        "workload": case.workload, "workload_version": case.workload_version, "mode": case.mode,
        "device": case.device, "device_name": case.device_name, "precision": case.precision,
        "batch_size": case.batch_size, "data": case.data, "size": case.size, "status": case.status,
        "error": case.error, "samples": summary.n if summary else 0,
        "median_step_s": summary.median if summary else None,
        "iqr_step_s": summary.iqr if summary else None,
        "rel_iqr": summary.rel_iqr if summary else None,
        "noisy": summary.noisy if summary else None,
        "throughput_samples_per_s": case.throughput(),
        "throughput_ci_low": ci[0] if ci else None, "throughput_ci_high": ci[1] if ci else None,
        "epoch_time_s": epoch[0] if epoch else None, "epoch_time_kind": epoch[3] if epoch else None,
        "peak_memory_bytes": case.peak_memory_bytes,
        # throughput_* count samples, or for a generation case decode tokens (over the batch).
        "throughput_unit": case.rate_unit(),
        **{name: value for name, value in catalogue_figures(case).items() if name != "peak_memory_bytes"},
        "peak_mark": mark_words(case.flops),
    }


def _csv_safe(value: object) -> object:
    # A cell starting with = + - @ is run as a formula by spreadsheets; a quote mark disarms it.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return "" if value is None else value


def to_csv(record: RunRecord) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for case in record.cases:
        writer.writerow({k: _csv_safe(v) for k, v in case_figures(record, case).items()})
    return out.getvalue()


def _md(value: object) -> str:
    text = "" if value is None else str(value)
    # Pipes would split the cell, newlines end the row, and HTML is live in most Markdown viewers.
    text = " ".join(text.split())
    for char, escaped in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), (">", "&gt;")):
        text = text.replace(char, escaped)
    return text


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def to_markdown(record: RunRecord) -> str:
    machine = record.environment.get("machine", {})
    host = machine.get("hostname", "") if isinstance(machine, dict) else ""
    lines = [f"# accelbench run {_md(record.run_id)}", "",
             f"{_md(record.created_at)} on {_md(host) or 'unknown machine'}, accelbench "
             f"{_md(record.accelbench_version)}", "",
             f"| workload | mode | device | batch | precision | status | {_md(rate_label(record.cases))} "
             "| median step (s) "
             "| IQR/median | epoch (s) |",
             "|---|---|---|---:|---|---|---:|---:|---:|---:|"]
    for case in record.cases:
        figures = case_figures(record, case)
        first_error = case.error.splitlines()[0] if case.error else ""
        status = case.status if case.ok else f"{case.status}: {first_error}"
        epoch = figures["epoch_time_s"]
        epoch_text = f"{epoch:.2f} {figures['epoch_time_kind']}" if isinstance(epoch, float) else "n/a"
        rel = figures["rel_iqr"]
        lines.append("| " + " | ".join(_md(cell) for cell in (
            case.workload, case.mode, case.device, case.batch_size, case.precision, status,
            _num(case.throughput(), ",.1f"), _num(figures["median_step_s"], ".4g"),  # type: ignore[arg-type]
            f"{rel * 100:.1f}%" if isinstance(rel, float) else "n/a", epoch_text)) + " |")
    flops = peak_rows(record.cases)
    if flops:  # the run table's --wide cell, and what the peak behind each % peak was
        lines += ["", "## FLOP/s against the measured peak", "", "| " + " | ".join(PEAK_COLUMNS) + " |",
                  "|---|---|---|---|---:|---:|---|"]
        lines += ["| " + " | ".join(_md(cell) for cell in row) + " |" for row in flops]
    return "\n".join(lines) + "\n"


def export(record: RunRecord, fmt: str) -> str:
    from accelbench.render.hud import to_hud

    return {"json": to_json, "csv": to_csv, "markdown": to_markdown, "hud": to_hud}[fmt](record)
