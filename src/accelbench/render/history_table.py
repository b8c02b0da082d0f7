"""``accelbench history``'s tables: the stored runs (with their figures across cases), and one
workload's throughput over time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelbench.render.fit import FittedTable
from accelbench.render.format import format_rate
from accelbench.render.generation_detail import OVERALL_COLUMNS, overall_group_rows
from accelbench.results import rate_unit
from accelbench.results.catalogue import key_headline

SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(SPARK[min(int((v - low) / span * (len(SPARK) - 1) + 0.5), len(SPARK) - 1)]
                   for v in values)


RUN_COLUMNS = ("run id", "date", "kind", "machine", "workloads", "devices", "statuses")


def runs_table(rows: list[Any], path: Path) -> FittedTable:
    """One row per stored run; ids and dates whole, lists wrapped between their items."""
    cells = [[row.run_id, row.created_at, row.kind, row.machine, ", ".join(row.workloads),
              ", ".join(row.devices),
              ", ".join(f"{count} {status}" for status, count in row.statuses.items())]
             for row in rows]
    return FittedTable(f"Stored runs ({path})", RUN_COLUMNS, cells, whole=("run id", "date"),
                       stack=("run id",), hint="--json shows them")


def _unit(mode: str, config_key: str) -> str:
    """What a series' stored rate counts: its key's headline (a --protocol series: its peer's)."""
    if not config_key:
        return rate_unit(mode) + (" (all sequences)" if mode == "generate" else "")
    figure = key_headline(json.loads(config_key))
    return figure.label + (" (all sequences)" if figure.name == "decode_tokens_per_s_total" else "")


def _change(first: Any, last: Any) -> str:
    """The latest rate against the first in percent; "noisy" where either figure is noise
    (store/history.noisy_figure: a busy machine, a noisy spread, an interval wider than it):
    a percent between such figures measures the machine's other work, not a change."""
    if first.noisy or last.noisy:
        return "noisy"
    return f"{(last.throughput / first.throughput - 1) * 100:+.1f}%"


TIMELINE_COLUMNS = ("machine", "device", "config", "runs", "first", "latest", "change", "trend")


def timeline_table(workload: str, mode: str, points: list[Any]) -> FittedTable:
    """One series per machine, device and comparability key: runs that did different work
    (fp32 and bf16, eager and compiled, batch 64 and 128) are never drawn as one line."""
    series: dict[tuple[str, str, str], list[Any]] = {}
    for point in points:
        series.setdefault((point.machine, point.device, point.config_key), []).append(point)
    rows: list[list[str]] = []
    units: dict[str, None] = {}  # each series' unit once, in order (a dict keeps the order)
    for (machine, device, key), mine in series.items():
        units.setdefault(_unit(mode, key), None)
        timed = [p for p in mine if p.throughput and p.status == "ok"]
        rates = [p.throughput for p in timed]
        first, last = (rates[0], rates[-1]) if rates else (None, None)
        change = _change(timed[0], timed[-1]) if len(timed) > 1 else ""
        rows.append([machine, device, mine[0].config or f"batch {mine[0].batch_size}",
                     str(len(mine)), format_rate(first), format_rate(last), change,
                     sparkline(rates)])
    unit = "; ".join(units) or _unit(mode, "")
    return FittedTable(f"{workload} {mode}: {unit} over time", TIMELINE_COLUMNS, rows,
                       right=("runs", "first", "latest", "change"),
                       whole=("runs", "first", "latest", "change"), stack=("machine", "device"),
                       drop=("trend",), hint="--json shows the series")


def overall_table(rows: list[Any]) -> FittedTable | None:
    """The stored runs' figures across cases (MLPerf Client's overall geometric means), as the
    history stores them with each run (store/history.py's ``protocol_overall`` table), in the words
    and columns compare's table of them uses; None where no listed run has any."""
    cells = overall_group_rows([(row.run_id, group) for row in rows for group in row.protocol_overall])
    if not cells:
        return None
    return FittedTable("Protocol figures across cases (stored with each run)", OVERALL_COLUMNS, cells,
                       right=OVERALL_COLUMNS[2:], whole=("run",), hint="--json shows them")
