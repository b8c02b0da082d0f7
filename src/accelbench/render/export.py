"""A stored run as JSON (re-loadable by ``load_record``), CSV (one row per case), Markdown, or the
PyTorch HUD benchmark format (one record per metric, ``hud.py``).

CSV and Markdown name every figure by the figure catalogue (results/catalogue.py): the CSV has one
header for every kind of work (what ran, the headline rate with its catalogue name, a training or
evaluation case's step statistics, then every catalogue figure by name, empty where the case's
kind of work has none); Markdown has a table per kind of work."""

from __future__ import annotations

import csv
import io
import json

from accelbench.render.generation_detail import OVERALL_COLUMNS, overall_rows
from accelbench.render.generation_execution import execution_words
from accelbench.render.peak_marks import PEAK_COLUMNS, mark_words, peak_rows
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import BY_NAME, FIGURES, case_headline
from accelbench.results.catalogue import case_figures as catalogue_figures
from accelbench.store.jsonfile import clean_for_json

FORMATS = ("json", "csv", "markdown", "hud")

#: What ran: the comparability key's fields (results/key.py) and the case's execution.
KEY_COLUMNS = (
    "run_id", "created_at", "machine", "workload", "workload_version", "mode", "device", "device_name",
    "precision", "compile_backend", "channels_last", "batch_size", "prompt_len", "new_tokens",
    "streamed", "protocol", "execution", "data", "size", "status", "error",
)
#: The case's headline rate (results/catalogue.headline), whatever it counts: its catalogue
#: name and unit beside it, and its 95% interval.
RATE_COLUMNS = ("rate", "rate_name", "rate_unit", "rate_ci_low", "rate_ci_high")
#: Statistics of a training or evaluation case's timed steps; empty for a generation case (its
#: per-token and per-round figures are the catalogue's: ttft_s, tpot_s, itl_p50_s, round_spread).
STEP_COLUMNS = ("samples", "median_step_s", "iqr_step_s", "rel_iqr", "noisy", "epoch_time_s",
                "epoch_time_kind")
CSV_COLUMNS: tuple[str, ...] = (*KEY_COLUMNS, *RATE_COLUMNS, *STEP_COLUMNS)
#: Then every catalogue figure by its name (results/catalogue.py), empty where the case's kind of
#: work has none, and what the peak behind fraction_of_peak was (render/peak_marks.py: "" where
#: nothing marks it).
CSV_COLUMNS += (*(f.name for f in FIGURES if f.name not in CSV_COLUMNS), "peak_mark")


def to_json(record: RunRecord) -> str:
    # The same text save_record writes, so the export is a result file like any other.
    return json.dumps(clean_for_json(record.to_dict()), indent=1) + "\n"


def case_figures(record: RunRecord, case: CaseResult) -> dict[str, object]:
    steps = case.mode != "generate"
    summary = case.summary() if steps else None
    ci = case.throughput_ci()
    epoch = case.epoch_time() if steps else None
    machine = record.environment.get("machine", {})
    return {
        "run_id": record.run_id, "created_at": record.created_at,
        "machine": machine.get("hostname", "") if isinstance(machine, dict) else "",
        "workload": case.workload, "workload_version": case.workload_version, "mode": case.mode,
        "device": case.device, "device_name": case.device_name, "precision": case.precision,
        "compile_backend": case.compile_backend or "none", "channels_last": case.channels_last,
        "batch_size": case.batch_size,
        "prompt_len": case.prompt_len if not steps else None,
        "new_tokens": case.new_tokens if not steps else None,
        "streamed": case.streamed if not steps else None, "protocol": case.protocol,
        "execution": execution_words(case.generation.execution if case.generation else None),
        "data": case.data, "size": case.size, "status": case.status, "error": case.error,
        "rate": case.throughput(), "rate_name": case_headline(case).name, "rate_unit": case.rate_unit(),
        "rate_ci_low": ci[0] if ci else None, "rate_ci_high": ci[1] if ci else None,
        "samples": summary.n if summary else None,
        "median_step_s": summary.median if summary else None,
        "iqr_step_s": summary.iqr if summary else None,
        "rel_iqr": summary.rel_iqr if summary else None,
        "noisy": summary.noisy if summary else None,
        "epoch_time_s": epoch[0] if epoch else None, "epoch_time_kind": epoch[3] if epoch else None,
        **catalogue_figures(case),
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


def _num(value: object, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, int | float) and not isinstance(value, bool) else "n/a"


def _status(case: CaseResult) -> str:
    first_error = case.error.splitlines()[0] if case.error else ""
    return case.status if case.ok else f"{case.status}: {first_error}"


def _table(header: list[str], align: list[str], rows: list[list[object]]) -> list[str]:
    return ["| " + " | ".join(_md(cell) for cell in header) + " |", "|" + "|".join(align) + "|",
            *("| " + " | ".join(_md(cell) for cell in row) + " |" for row in rows)]


#: A generation case's figures in its Markdown table, by catalogue name (labelled as the catalogue
#: labels them, in seconds).
GENERATION_SECONDS = ("ttft_s", "tpot_s", "itl_p50_s", "e2e_s")


def _step_rows(record: RunRecord, cases: list[CaseResult]) -> list[str]:
    header = ["workload", "mode", "device", "batch", "precision", "compile", "status",
              BY_NAME["samples_per_s"].label, f"median {BY_NAME['median_step_s'].label} (s)", "IQR/median",
              f"{BY_NAME['epoch_s'].label} (s)"]
    rows: list[list[object]] = []
    for case in cases:
        figures = case_figures(record, case)
        epoch, rel = figures["epoch_time_s"], figures["rel_iqr"]
        rows.append([case.workload, case.mode, case.device, case.batch_size, case.precision,
                     case.compile_backend or "none", _status(case), _num(figures["rate"], ",.1f"),
                     _num(figures["median_step_s"], ".4g"),
                     f"{rel * 100:.1f}%" if isinstance(rel, float) else "n/a",
                     f"{epoch:.4g} {figures['epoch_time_kind']}" if isinstance(epoch, float) else "n/a"])
    return _table(header, ["---"] * 3 + ["---:"] + ["---"] * 3 + ["---:"] * 4, rows)


def _generation_rows(record: RunRecord, cases: list[CaseResult]) -> list[str]:
    header = ["workload", "device", "batch", "prompt_len", "new_tokens", "precision", "compile",
              "protocol", "execution", "status", "rate", "rate_name",
              *(f"{BY_NAME[name].label} (s)" for name in GENERATION_SECONDS)]
    rows: list[list[object]] = []
    for case in cases:
        figures = case_figures(record, case)
        rows.append([case.workload, case.device, case.batch_size, case.prompt_len, case.new_tokens,
                     case.precision, case.compile_backend or "none", case.protocol or "none",
                     figures["execution"] or "n/a", _status(case),
                     f"{_num(figures['rate'], ',.1f')} {case.rate_unit()}" if figures["rate"] else "n/a",
                     figures["rate_name"], *(_num(figures[name], ".4g") for name in GENERATION_SECONDS)])
    return _table(header, ["---"] * 2 + ["---:"] * 3 + ["---"] * 5 + ["---:", "---"] + ["---:"] * 4, rows)


def to_markdown(record: RunRecord) -> str:
    """One table per kind of work, its columns named by the figure catalogue: training and
    evaluation (samples/s, the median step, the epoch); generation (the case's lengths, protocol
    and execution, its rate with the figure it is, TTFT, TPOT, ITL p50, E2E latency); figures across
    cases (MLPerf Client's overall geometric means), as the record stores them."""
    machine = record.environment.get("machine", {})
    host = machine.get("hostname", "") if isinstance(machine, dict) else ""
    lines = [f"# accelbench run {_md(record.run_id)}", "",
             f"{_md(record.created_at)} on {_md(host) or 'unknown machine'}, accelbench "
             f"{_md(record.accelbench_version)}"]
    steps = [case for case in record.cases if case.mode != "generate"]
    generating = [case for case in record.cases if case.mode == "generate"]
    if steps:
        lines += ["", "## Training and evaluation", "", *_step_rows(record, steps)]
    if generating:
        lines += ["", "## Generation", "", *_generation_rows(record, generating)]
    overall = overall_rows([(record.run_id, record)])
    if overall:  # figures across cases, as stored in the record (MLPerf Client's overall)
        cells: list[list[object]] = [[*row[1:]] for row in overall]
        lines += ["", "## Protocol figures across cases", "",
                  *_table([*OVERALL_COLUMNS[1:]], ["---", "---:", "---:", "---:"], cells)]
    flops = peak_rows(record.cases)
    if flops:  # the run table's --wide cell, and what the peak behind each % peak was
        lines += ["", "## FLOP/s against the measured peak", "", "| " + " | ".join(PEAK_COLUMNS) + " |",
                  "|---|---|---|---|---:|---:|---|"]
        lines += ["| " + " | ".join(_md(cell) for cell in row) + " |" for row in flops]
    return "\n".join(lines) + "\n"


def export(record: RunRecord, fmt: str) -> str:
    from accelbench.render.hud import to_hud

    return {"json": to_json, "csv": to_csv, "markdown": to_markdown, "hud": to_hud}[fmt](record)
