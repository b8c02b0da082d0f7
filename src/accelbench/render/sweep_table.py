"""A batch-size sweep as rows (shared by the terminal table and the HTML report) and sentences."""

from __future__ import annotations

from accelbench.render.fit import FittedTable
from accelbench.render.format import format_range, format_rate, format_seconds, with_rate_label
from accelbench.render.table import memory_cell
from accelbench.render.words import shorten
from accelbench.results import RunRecord
from accelbench.sweeps.analysis import SATURATION_FRACTION, Curve, crossovers, curves

COLUMNS = ("workload", "mode", "device", "batch", "samples/s", "95% CI", "median step", "IQR/med",
           "peak mem", "note")


def columns(record: RunRecord) -> tuple[str, ...]:
    """The column headers, the rate's naming its unit (samples/s, or decode tokens/s)."""
    return with_rate_label(COLUMNS, record.cases)


def _note(curve: Curve, batch: int) -> str:
    marks = []
    if curve.saturated and curve.saturation is not None and curve.saturation.batch_size == batch:
        marks.append("saturates")
    if curve.best is not None and curve.best.batch_size == batch:
        marks.append("best")
    return ", ".join(marks)


def sweep_rows(record: RunRecord, error_width: int = 80) -> list[list[str]]:
    """Plain-text cells, one row per device and batch size (a failed one shows its status and
    the start of its error). Peak memory carries its source tag as in the run table (RSS,
    allocator, sampled with "≥"): a sweep over the CPU and an accelerator shows both."""
    rows = []
    for curve in curves(record):
        for case in curve.cases:
            head = [case.workload + curve.config, case.mode, case.device, str(case.batch_size)]
            if not case.ok:
                rows.append([*head, case.status.upper(), "", "", "", "", shorten(case.error, error_width)])
                continue
            summary = case.summary()
            rows.append([*head, format_rate(case.throughput()),
                         format_range(case.throughput_ci()),
                         format_seconds(summary.median if summary else None),
                         f"{summary.rel_iqr:.1%}" if summary else "n/a",
                         memory_cell(case),
                         _note(curve, case.batch_size)])
    return rows


def summary_lines(record: RunRecord) -> list[str]:
    """Saturation per device, then the crossover per accelerator, as sentences."""
    found = curves(record)
    return [curve.describe() for curve in found] + crossovers(found)


def definition() -> str:
    return (f"saturates: the smallest batch within {1 - SATURATION_FRACTION:.0%} of the device's best "
            "median throughput in this sweep; crossover: the smallest batch from which the "
            "accelerator's throughput interval lies above the CPU's at every larger batch.")


def sweep_table(record: RunRecord) -> FittedTable:
    """For a terminal: one workload's name goes in the title, so the table fits 100 columns."""
    rows = sweep_rows(record, error_width=30)
    workloads = {row[0] for row in rows}
    single = len(workloads) == 1
    title = f"accelbench sweep {record.run_id}" + (f": {next(iter(workloads))}" if single else "")
    headers = columns(record)
    shown = headers[1:] if single else headers
    return FittedTable(title, shown, [row[1:] if single else row for row in rows],
                       right=[c for c in shown if c not in ("workload", "mode", "device", "note")],
                       whole=[c for c in shown if c not in ("workload", "mode", "device", "note",
                                                            "peak mem")],
                       stack=("workload", "mode", "device", "batch"))


def figure_lines(record: RunRecord) -> list[tuple[str, list[tuple[int, float, tuple[float, float] | None]],
                                                  int | None]]:
    """Per curve: its name, the (batch, rate, CI) points that ran (samples/s, or decode tokens/s
    for generation: ``columns``), and its saturation batch."""
    lines = []
    for curve in curves(record):
        points = [(c.batch_size, c.throughput() or 0.0, c.throughput_ci()) for c in curve.cases
                  if c.ok and c.throughput()]
        saturation = curve.saturation.batch_size if curve.saturated and curve.saturation else None
        lines.append((f"{curve.workload}{curve.config} {curve.mode} {curve.device}", points, saturation))
    return lines
