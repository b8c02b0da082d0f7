"""``accelbench site SOURCE... -o DIR``: a static results site (plain HTML and CSS) anyone can host."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from accelbench.cli.common import add_quiet_argument, say
from accelbench.errors import UsageError


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("site", help="a static results site from shared bundles")
    parser.add_argument("sources", nargs="+", metavar="SOURCE",
                        help="bundle files, folders of bundles, http(s) addresses or hf://datasets/ORG/NAME")
    parser.add_argument("--output", "-o", type=Path, required=True, metavar="DIR",
                        help="folder to write the site into (made if missing)")
    add_quiet_argument(parser, "no warnings about the sources and no line saying what was written")
    parser.set_defaults(execute=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from accelbench.files import write_atomic
    from accelbench.render.site import render_site
    from accelbench.sharing.query import read_collection

    folder: Path = args.output
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"output {folder} is a file; give a folder for the site")

    def warn(message: str) -> None:
        if not args.quiet:
            say(f"accelbench: warning: {message}")

    collection, loaded = read_collection(args.sources, warn)
    if not collection.results:
        raise UsageError(f"the sources hold no usable shared result to put on a site ({loaded.summary()})")
    pages = render_site(collection, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in pages.items():
            write_atomic(folder / name, text)
    except OSError as error:
        raise UsageError(f"cannot write the site into {folder}: {error.strerror or error}") from None
    if args.quiet:
        return 0
    say(f"site of {collection.results:,} result(s) ({len(pages)} pages) written to "
        f"{folder / 'index.html'}; {loaded.summary()}")
    return 0
