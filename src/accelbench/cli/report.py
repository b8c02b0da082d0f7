"""``accelbench report [RUNS...] -o report.html``: one self-contained, offline HTML report."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.cli.common import add_db_option, add_quiet_argument, positive_int, say
from accelbench.errors import UsageError

if TYPE_CHECKING:
    from accelbench.store.history import TimelinePoint

# Its --help imports no matplotlib, results or store (tests/cli/test_cli_imports.py): they are imported
# once the report is drawn.

DEFAULT_LAST = 5


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("report", help="write a self-contained HTML report")
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help=f"run ids (or prefixes) or result files (default: the {DEFAULT_LAST} most "
                        "recent runs in the history)")
    parser.add_argument("--output", "-o", type=Path, default=Path("report.html"),
                        help="HTML file to write (default report.html)")
    parser.add_argument("--last", type=positive_int, default=DEFAULT_LAST,
                        help="without RUNS: how many recent runs to include")
    parser.add_argument("--reference", action="store_true", help="add the published results")
    parser.add_argument("--title", default="accelbench report",
                        help="the report's heading and page title (default: accelbench report)")
    add_quiet_argument(parser, "no line saying where the report went")
    add_db_option(parser)
    parser.set_defaults(execute=execute)


def _timelines(db_path: Path, keys: list[tuple[str, str]]) -> dict[tuple[str, str], list[TimelinePoint]]:
    from accelbench.store.history import HistoryDB

    if not db_path.exists():
        return {}
    with HistoryDB(db_path, create=False) as db:
        return {(workload, mode): db.timeline(workload, mode) for workload, mode in keys}


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from accelbench.cli.compare import load_runs
    from accelbench.compare import compare_runs
    from accelbench.files import write_atomic
    from accelbench.render.html import render_report
    from accelbench.store.history import HistoryDB, default_db_path
    from accelbench.store.jsonfile import check_writable

    check_writable(args.output)
    db_path = args.db or default_db_path()
    specs = list(args.runs)
    if not specs:
        if not db_path.exists():
            raise UsageError(f"no runs given and no history database at {db_path}")
        with HistoryDB(db_path, create=False) as db:
            specs = [row.run_id for row in db.list_runs(limit=args.last)]
        if not specs:
            raise UsageError(f"no runs given and the history at {db_path} is empty")
    runs = load_runs(specs, args.db)
    comparisons = compare_runs(runs, with_reference=args.reference)
    timelines = _timelines(db_path, [(g.workload, g.mode) for g in comparisons])
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    write_atomic(args.output, render_report(runs, comparisons, timelines, args.title, generated,
                                                  published=args.reference))
    if not args.quiet:
        say(f"Report on {len(runs)} run(s) written to {args.output}")
    return 0
