"""``accelbench history``: list stored runs; with --workload and --mode, throughput over time."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from accelbench.cli.common import add_db_option, add_json_argument, add_quiet_argument
from accelbench.cli.console import make_console
from accelbench.errors import UsageError
from accelbench.render.history_table import overall_table, runs_table, timeline_table
from accelbench.render.json_views import history_json
from accelbench.store.history import HistoryDB, default_db_path, parse_time


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
    parser.add_argument("--mode", choices=("train", "eval", "generate"),
                        help="with --workload: also show that workload's throughput over time "
                        "(generate: decode tokens/s over all sequences)")
    parser.add_argument("--device", help="only runs on this device or device kind (cpu, cuda, cuda:1)")
    parser.add_argument("--machine", help="only runs on machines whose host name contains this")
    parser.add_argument("--since", help="only runs from this date on (YYYY-MM-DD)")
    add_json_argument(parser, "print the runs (and the timeline) as JSON: the stored figures")
    add_quiet_argument(parser, "no line saying that nothing is stored or matches")
    add_db_option(parser)
    parser.set_defaults(execute=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    if args.mode and not args.workload:
        raise UsageError("--mode needs --workload: the timeline is of one workload")
    if args.since:
        parse_time(args.since)  # a bad date is an error even when the database is empty
    console = make_console(quiet=args.quiet)
    path = args.db or default_db_path()
    if not path.exists():
        if args.json:
            sys.stdout.write(history_json(path, [], [] if args.mode else None, args.mode))
            return 0
        console.print(f"No runs stored yet (no history database at {path}).")
        return 0
    with open_db(path) as db:
        rows = db.list_runs(workload=args.workload, device=args.device, machine=args.machine,
                            since=args.since)
        points = db.timeline(args.workload, args.mode, args.device, args.machine) if args.mode else []
    if args.json:
        sys.stdout.write(history_json(path, rows, points if args.mode else None, args.mode))
        return 0
    if not rows:
        console.print("No stored runs match.")
        return 0
    console.quiet = False  # the tables are the result
    console.print(runs_table(rows, path))
    overall = overall_table(rows)
    if overall is not None:  # figures across cases, as stored with each run (MLPerf Client's overall)
        console.print(overall)
    if args.mode:
        console.print(timeline_table(args.workload, args.mode, points))
    return 0
