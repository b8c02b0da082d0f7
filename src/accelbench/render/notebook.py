"""A run record as the Python API shows it: an HTML table for notebooks (``_repr_html_``:
``templates/notebook.html.j2``, escaped like the report), and outside a notebook (``print``) the
tables ``accelbench run`` prints, as plain text."""

from __future__ import annotations

import io

from rich.console import Console

from accelbench.measure.trackers.memory import format_bytes
from accelbench.render.format import format_range, format_rate, format_seconds, with_rate_label
from accelbench.render.table import config_label
from accelbench.results import RunRecord

COLUMNS = ("workload", "mode", "device", "config", "batch", "status", "samples/s", "95% CI",
           "median step", "IQR/median", "peak memory", "ran")


def record_html(record: RunRecord) -> str:
    rows = []
    run = record.options.run_options()
    for case in record.cases:
        summary = case.summary()
        rows.append((
            case.workload, case.mode, case.device, config_label(case), str(case.batch_size),
            case.status if case.ok else f"{case.status}: {case.error.splitlines()[0] if case.error else ''}",
            format_rate(case.throughput()),
            format_range(case.throughput_ci()),
            format_seconds(summary.median if summary else None),
            f"{summary.rel_iqr:.1%}" if summary else "n/a",
            format_bytes(case.peak_memory_bytes) if case.peak_memory_bytes else "n/a",
            case.isolation or (run.isolation if run else ""),
        ))
    caption = f"accelbench {record.kind} {record.run_id} ({record.created_at})"
    lines: list[str] = []
    if record.kind == "sweep":
        from accelbench.render.sweep_table import summary_lines

        lines = summary_lines(record)
    from accelbench.render.templating import render

    return render("notebook.html.j2", columns=with_rate_label(COLUMNS, record.cases), rows=rows,
                  caption=caption, lines=lines)


def record_text(record: RunRecord, width: int = 100) -> str:
    """What ``accelbench run`` prints for ``record`` (render/run_output.py), as plain text at
    ``width`` columns: ``print(result)`` outside a notebook."""
    from accelbench.render.run_output import run_renderables

    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    for part in run_renderables(record):
        console.print(part)
    return console.export_text(styles=False).rstrip("\n")
