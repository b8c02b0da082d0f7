"""``accelbench import FILE...``: add result files to the history (a file already there is skipped)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from accelbench.cli.common import add_quiet_argument
from accelbench.cli.history import add_db_option, open_db
from accelbench.store.jsonfile import load_record


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("import", help="add result JSON files to the history")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="result JSON files")
    add_quiet_argument(parser, "no line per file")
    add_db_option(parser)
    parser.set_defaults(execute=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    # Every file is read and validated before the database is touched, so one bad file among
    # many leaves the history as it was.
    records = [(path, load_record(path)) for path in args.files]
    say = (lambda line: None) if args.quiet else print
    with open_db(args.db, create=True) as db:
        for path, record in records:
            if db.contains(record.run_id):
                say(f"{path}: run {record.run_id} is already in the history; nothing to do")
                continue
            db.add_record(record)
            what = (f"{len(record.probes)} probed devices" if record.kind == "probe"
                    else f"{len(record.cases)} cases")
            say(f"{path}: imported run {record.run_id} ({what})")
    return 0
