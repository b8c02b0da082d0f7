"""``accelbench history``: list stored runs; with --workload and --mode, throughput over time."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from accelbench.errors import UsageError
from accelbench.render.format import format_rate
from accelbench.store.history import HistoryDB, default_db_path, parse_time

SPARK = "▁▂▃▄▅▆▇█"


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """``--db PATH``, shared by every command that reads or writes the history."""
    parser.add_argument("--db", type=Path, default=None, metavar="PATH",
                        help="history database (default: history.sqlite in the accelbench data folder)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def open_db(path: Path | None, create: bool = False) -> HistoryDB:
    """Open the history; reading commands do not create an empty database as a side effect."""
    path = path or default_db_path()
    if not create and not path.exists():
        raise UsageError(f"no history database at {path} yet; store runs with 'accelbench run' or "
                         f"'accelbench import'")
    return HistoryDB(path, create=create)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("history", help="list stored runs and throughput over time")
    parser.add_argument("--workload", help="only runs with this workload")
    parser.add_argument("--mode", choices=("train", "eval"),
                        help="with --workload: also show that workload's throughput over time")
    parser.add_argument("--device", help="only runs on this device or device kind (cpu, cuda, cuda:1)")
    parser.add_argument("--machine", help="only runs on machines whose host name contains this")
    parser.add_argument("--since", help="only runs from this date on (YYYY-MM-DD)")
    add_db_option(parser)
    parser.set_defaults(execute=execute)


def sparkline(values: list[float]) -> str:
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(SPARK[min(int((v - low) / span * (len(SPARK) - 1) + 0.5), len(SPARK) - 1)]
                   for v in values)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    if args.mode and not args.workload:
        raise UsageError("--mode needs --workload: the timeline is of one workload")
    if args.since:
        parse_time(args.since)  # a bad date is an error even when the database is empty
    console = Console()
    path = args.db or default_db_path()
    if not path.exists():
        console.print(f"No runs stored yet (no history database at {path}).")
        return 0
    with open_db(path) as db:
        rows = db.list_runs(workload=args.workload, device=args.device, machine=args.machine,
                            since=args.since)
        points = db.timeline(args.workload, args.mode, args.device, args.machine) if args.mode else []
    if not rows:
        console.print("No stored runs match.")
        return 0
    table = Table(title=f"Stored runs ({path})", title_justify="left")
    for column in ("run id", "date", "kind", "machine", "workloads", "devices", "statuses"):
        table.add_column(column, overflow="fold")
    for row in rows:
        statuses = ", ".join(f"{count} {status}" for status, count in row.statuses.items())
        table.add_row(*(Text(cell) for cell in (row.run_id, row.created_at, row.kind, row.machine,
                                                 ", ".join(row.workloads), ", ".join(row.devices),
                                                 statuses)))
    console.print(table)
    if args.mode:
        console.print(_timeline_table(args.workload, args.mode, points))
    return 0


def _timeline_table(workload: str, mode: str, points: list[Any]) -> Table:
    """One series per machine, device and comparability key: runs that did different work
    (fp32 and bf16, eager and compiled, batch 64 and 128) are never drawn as one line."""
    series: dict[tuple[str, str, str], list[Any]] = {}
    for point in points:
        series.setdefault((point.machine, point.device, point.config_key), []).append(point)
    table = Table(title=f"{workload} {mode}: samples/s over time", title_justify="left")
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
