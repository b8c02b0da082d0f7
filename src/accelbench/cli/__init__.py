"""``accelbench``: one thin module per subcommand over the library."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from accelbench import __version__
from accelbench.cli import check, compare, doctor, export, history, import_, list_, probe, report, run
from accelbench.cli.common import OneLineParser
from accelbench.errors import UsageError

COMMANDS = (run, doctor, list_, check, probe, history, compare, report, import_, export)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="accelbench",
                           description="Benchmark PyTorch training and evaluation on every "
                           "device of this machine.")
    parser.add_argument("--version", action="version", version=f"accelbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                       parser_class=OneLineParser)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    debug = bool(getattr(args, "debug", False))
    try:
        return int(args.execute(args, argv))
    except UsageError as error:
        if debug:
            raise
        sys.stderr.write(f"accelbench: error: {error}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("accelbench: interrupted\n")
        return 130
