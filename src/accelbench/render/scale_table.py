"""The table of a scaling run: one row per world size."""

from __future__ import annotations

from rich.markup import escape
from rich.text import Text

from accelbench.render.fit import FittedTable
from accelbench.render.format import format_rate
from accelbench.render.words import shorten
from accelbench.results import CaseResult, RunRecord, ScaleFigures

COLUMNS = ("world size", "backend", "strategy", "global samples/s", "per-process samples/s",
           "efficiency", "comm fraction", "status")


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def scale_row(case: CaseResult) -> list[str]:
    scale = case.scale
    if scale is None:  # not a scaling case: nothing of a world size to show
        return ["?", "", "", "", "", "", "", f"{case.status} (no scale figures)"]
    world = str(scale.world_size)
    if scale.nnodes > 1:
        world += f" ({scale.nnodes} nodes x {scale.nproc_per_node})"
    head = [world, scale.backend, scale.strategy]
    if not case.ok:
        return [*head, "", "", "", "", f"[red]{case.status}[/red] {escape(shorten(case.error, 90))}"]
    status = "ok"
    summary = case.summary()
    if summary is not None and summary.noisy:
        status = f"[yellow]ok, noisy ({summary.rel_iqr * 100:.0f}% IQR)[/yellow]"
    return [*head, format_rate(scale.global_throughput), format_rate(scale.per_process_throughput),
            _percent(scale.efficiency), _percent(scale.comm_fraction), status]


def scale_table(record: RunRecord) -> FittedTable:
    first = record.cases[0] if record.cases else None
    what = (f"{first.workload} train on {first.device}, batch {first.batch_size} per process"
            if first else "")
    scales: list[ScaleFigures] = [c.scale for c in record.cases if c.scale is not None]
    base = next((s.efficiency_baseline_world_size for s in scales
                 if s.efficiency_baseline_world_size), None)
    note = f"; efficiency vs world size {base}" if base else ""
    return FittedTable(f"accelbench scale {record.run_id}  {what}{note}", COLUMNS,
                       [[Text.from_markup(cell) for cell in scale_row(case)] for case in record.cases],
                       right=[c for c in COLUMNS if c not in ("backend", "strategy", "status")],
                       whole=("global samples/s", "per-process samples/s", "efficiency",
                              "comm fraction"), stack=("world size",))
