"""``accelbench export RUN_ID``: a stored run as JSON, CSV, Markdown or the PyTorch HUD format."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from accelbench.cli.common import add_quiet_argument, say
from accelbench.cli.history import add_db_option, open_db
from accelbench.files import write_atomic
from accelbench.render.export import FORMATS, export
from accelbench.store.jsonfile import check_writable


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("export", help="write a stored run as JSON, CSV, Markdown or the PyTorch "
                                   "HUD benchmark format (--format hud: one record per metric)")
    parser.add_argument("run_id", metavar="RUN_ID", help="a run id or a unique prefix of one")
    parser.add_argument("--format", choices=FORMATS, default="json",
                        help="json: the stored record (default); csv or markdown: one row per "
                        "case; hud: the PyTorch HUD benchmark format, one record per metric")
    parser.add_argument("--output", "-o", type=Path, help="write here instead of standard output")
    add_quiet_argument(parser, "no line saying where the file went")
    add_db_option(parser)
    parser.set_defaults(execute=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    if args.output:
        check_writable(args.output)
    with open_db(args.db) as db:
        record = db.get(args.run_id)
    text = export(record, args.format)
    if args.output:
        write_atomic(args.output, text)
        if not args.quiet:
            say(f"run {record.run_id} written to {args.output}")
    else:
        sys.stdout.write(text)
    return 0
