"""``accelbench history``'s tables: the stored runs, and one workload's throughput over time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from accelbench.render.format import format_rate
from accelbench.results import rate_unit

SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(SPARK[min(int((v - low) / span * (len(SPARK) - 1) + 0.5), len(SPARK) - 1)]
                   for v in values)


def runs_table(rows: list[Any], path: Path) -> Table:
    table = Table(title=f"Stored runs ({path})", title_justify="left")
    for column in ("run id", "date", "kind", "machine", "workloads", "devices", "statuses"):
        table.add_column(column, overflow="fold")
    for row in rows:
        statuses = ", ".join(f"{count} {status}" for status, count in row.statuses.items())
        table.add_row(*(Text(cell) for cell in (row.run_id, row.created_at, row.kind, row.machine,
                                                 ", ".join(row.workloads), ", ".join(row.devices),
                                                 statuses)))
    return table


def timeline_table(workload: str, mode: str, points: list[Any]) -> Table:
    """One series per machine, device and comparability key: runs that did different work
    (fp32 and bf16, eager and compiled, batch 64 and 128) are never drawn as one line."""
    series: dict[tuple[str, str, str], list[Any]] = {}
    for point in points:
        series.setdefault((point.machine, point.device, point.config_key), []).append(point)
    unit = rate_unit(mode) + (" (all sequences)" if mode == "generate" else "")
    table = Table(title=f"{workload} {mode}: {unit} over time", title_justify="left")
    for column in ("machine", "device", "config", "runs", "first", "latest", "change", "trend"):
        table.add_column(column, overflow="fold")
    for (machine, device, _), mine in series.items():
        rates = [p.throughput for p in mine if p.throughput and p.status == "ok"]
        first, last = (rates[0], rates[-1]) if rates else (None, None)
        change = f"{(last / first - 1) * 100:+.1f}%" if first and last and len(rates) > 1 else ""
        table.add_row(*(Text(c) for c in (machine, device, mine[0].config or f"batch {mine[0].batch_size}",
                                          str(len(mine)), format_rate(first), format_rate(last), change,
                                          sparkline(rates))))
    return table
