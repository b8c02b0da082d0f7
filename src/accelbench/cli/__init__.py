"""``accelbench``: one thin module per subcommand over the library."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from accelbench import __version__
from accelbench.cli.common import DEBUG_HELP, OneLineParser, add_debug_argument
from accelbench.errors import UsageError

#: Subcommand -> (module, one-line help). Only the chosen command's module is imported, so
#: commands that never touch torch (history, compare, export, report ...) start fast.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("accelbench.cli.run", "time workloads on devices"),
    "doctor": ("accelbench.cli.doctor", "show devices, builds and what is missing"),
    "list": ("accelbench.cli.list_", "show the workloads, their sizes and FLOPs"),
    "check": ("accelbench.cli.check", "numerical parity of a device against the CPU"),
    "probe": ("accelbench.cli.probe", "which features work on each device"),
    "history": ("accelbench.cli.history", "list stored runs and throughput over time"),
    "compare": ("accelbench.cli.compare", "compare runs; 'faster' only when significant"),
    "report": ("accelbench.cli.report", "write a self-contained HTML report"),
    "import": ("accelbench.cli.import_", "add result JSON files to the history"),
    "export": ("accelbench.cli.export", "write a stored run as JSON, CSV or Markdown"),
    "scale": ("accelbench.cli.scale", "how a workload's training scales over processes and machines"),
    "sweep": ("accelbench.cli.sweep", "throughput per batch size and device; saturation and crossover"),
    "selftest": ("accelbench.cli.selftest", "prove this device's figures can be trusted (pass/fail)"),
    "roofline": ("accelbench.cli.roofline", "measured ceilings: FLOP/s, bandwidth, launch latency"),
    "share": ("accelbench.cli.share", "write stored runs as a bundle others can compare against"),
    "site": ("accelbench.cli.site", "a static results site from shared bundles"),
    "hub": ("accelbench.cli.hub", "compact a hub's bundles into Parquet shards; aggregate its bands"),
}


def _chosen_command(argv: Sequence[str]) -> str | None:
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(argv: Sequence[str] = ()) -> OneLineParser:
    parser = OneLineParser(prog="accelbench",
                           description="Benchmark PyTorch training and evaluation on every "
                           "device of this machine.")
    parser.add_argument("--version", action="version", version=f"accelbench {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help=f"{DEBUG_HELP} (before or after the command)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                       parser_class=OneLineParser)
    chosen = _chosen_command(argv)
    for name, (module, help_text) in COMMANDS.items():
        if name == chosen:
            loaded = importlib.import_module(module)
            loaded.add_parser(subparsers)
            # Also after the command, as each command once declared it.
            add_debug_argument(subparsers.choices[name], getattr(loaded, "DEBUG_HELP", DEBUG_HELP))
        else:
            subparsers.add_parser(name, help=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    debug = bool(args.debug)
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
