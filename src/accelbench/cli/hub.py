"""``accelbench hub compact SOURCE... -o DIR`` and ``accelbench hub aggregate SOURCE... -o FILE``:
a hub's bundles as Parquet shards, and its bands as a table that places a result offline."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from accelbench.cli.common import add_quiet_argument, say
from accelbench.errors import UsageError

SOURCES_HELP = ("bundle files, folders of bundles or of Parquet shards, http(s) addresses or "
                "hf://datasets/ORG/NAME")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("hub", help="compact a hub's bundles into Parquet shards; aggregate "
                                   "its bands")
    commands = parser.add_subparsers(dest="hub_command", metavar="COMMAND", parser_class=type(parser))
    compact = commands.add_parser("compact", help="bundles to Parquet shards by mode and device class: "
                                  "hashes and signatures verified, duplicates dropped, conflicts and "
                                  "outliers quarantined, refused lines listed")
    compact.add_argument("sources", nargs="+", metavar="SOURCE",
                         help="bundle files, folders of bundles, http(s) addresses or hf://datasets/ORG/NAME "
                         "(shards are derived: compaction reads the bundles)")
    compact.add_argument("--output", "-o", type=Path, required=True, metavar="DIR",
                         help="folder of the shards (made if missing; an earlier compaction there is "
                         "replaced)")
    compact.add_argument("--workers", type=int, metavar="N",
                         help="processes reading bundles (default: the CPUs)")
    add_quiet_argument(compact, "no warnings and no summary line")
    compact.set_defaults(execute=execute_compact)
    aggregate = commands.add_parser("aggregate", help="per key and device class: machines, percentiles "
                                    "1-99 and dates, for compare --against FILE")
    aggregate.add_argument("sources", nargs="*", metavar="SOURCE", help=SOURCES_HELP)
    aggregate.add_argument("--output", "-o", type=Path, required=True, metavar="FILE.json",
                           help="the table to write")
    aggregate.add_argument("--published", action="store_true",
                           help="write the table the package ships (the published reference rows, "
                           "marked, with their lower threshold) instead of aggregating sources")
    add_quiet_argument(aggregate, "no warnings and no summary line")
    aggregate.set_defaults(execute=execute_aggregate)
    parser.set_defaults(execute=lambda args, argv: _no_command(parser))


def _no_command(parser: argparse.ArgumentParser) -> int:
    raise UsageError("give a hub command: compact or aggregate (accelbench hub --help)")


def _say(args: argparse.Namespace, line: str) -> None:
    """A warning or the summary line on stderr, unless ``--quiet``."""
    if not args.quiet:
        say(line)


def execute_compact(args: argparse.Namespace, argv: list[str]) -> int:
    from accelbench.hub.compact import compact
    from accelbench.sharing.shards import REFUSED

    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    report = compact(list(args.sources), args.output,
                     lambda message: _say(args, f"accelbench: warning: {message}"), args.workers)
    _say(args, f"{report.summary()}; written to {args.output}"
         + (f" (refused lines and why: {args.output / REFUSED})" if report.refused
            or report.duplicates else ""))
    return 0


def execute_aggregate(args: argparse.Namespace, argv: list[str]) -> int:
    from accelbench.compare.bands import MIN_MACHINES
    from accelbench.sharing.bands import published_table, write_table

    if args.published:
        if args.sources:
            raise UsageError("--published writes the shipped table of published references; give no SOURCE")
        table = published_table()
        write_table(args.output, table)
        _say(args, f"{len(table['bands'])} published band(s) written to {args.output}")
        return 0
    if not args.sources:
        raise UsageError(f"give the sources to aggregate ({SOURCES_HELP}), or --published")
    from accelbench.hub.aggregate import aggregate

    bands, loaded = aggregate(list(args.sources), args.output,
                              lambda message: _say(args, f"accelbench: warning: {message}"))
    _say(args, f"{len(bands)} band(s) (keys and device classes with at least {MIN_MACHINES} "
         f"machines) written to {args.output}; {loaded.summary()}")
    return 0
