"""``accelbench selftest``: prove that the figures accelbench prints on a device can be trusted.
One pass/fail line per check; exit code 0 when all pass, 1 when any fails, 2 for bad usage."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from accelbench.cli.common import add_json_argument, add_report_arguments, comma_list
from accelbench.cli.console import make_console
from accelbench.devices import DEVICE_HELP, DeviceSet
from accelbench.errors import UsageError
from accelbench.files import write_atomic
from accelbench.selftest.suite import GROUPS
from accelbench.store.jsonfile import check_writable


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("selftest", help="prove this device's figures can be trusted")
    parser.add_argument("--device", default="all", help=f"{DEVICE_HELP} (default: all)")
    parser.add_argument("--only", type=comma_list, metavar="GROUPS",
                        help=f"run only these check groups ({', '.join(GROUPS)})")
    parser.add_argument("--quick", action="store_true",
                        help="fewer timing rounds and smaller bandwidth buffers (128 MiB)")
    add_json_argument(parser, "print the results as JSON (every check: its group, name, status, "
                      "figures and detail); the lines go to stderr")
    add_report_arguments(parser)
    parser.set_defaults(execute=execute)


def chosen_groups(only: tuple[str, ...] | None) -> tuple[str, ...]:
    if not only:
        return GROUPS
    unknown = [group for group in only if group not in GROUPS]
    if unknown:
        raise UsageError(f"--only {','.join(unknown)!r} is not a check group; allowed: "
                         f"{', '.join(GROUPS)}")
    return tuple(group for group in GROUPS if group in only)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from rich.text import Text

    from accelbench.render.fit import Prose
    from accelbench.render.selftest_table import check_line, summary_line
    from accelbench.selftest.suite import run_selftest

    groups = chosen_groups(args.only)
    if args.output:
        check_writable(args.output)
    devices = DeviceSet.current()
    chosen = devices.select(args.device)
    # With --json, stdout carries only the JSON; the lines go to stderr as they come.
    console = make_console(stderr=args.json, highlight=False, quiet=args.quiet)
    summary = run_selftest(devices, chosen, groups, args.quick,
                           on_result=lambda result: console.print(
                               Prose(Text.from_markup(check_line(result.to_dict())))))
    console.quiet = False  # --quiet drops the line per check, never the verdict
    console.print(Prose(Text.from_markup(summary_line(summary))))
    from accelbench.store.selftest_latest import record_selftest

    record_selftest(summary)  # so that a shared result can say whether selftest passed here
    text = json.dumps(summary, indent=1) + "\n"
    if args.output:
        write_atomic(args.output, text)
    if args.json:
        sys.stdout.write(text)
    return 0 if summary["passed"] else 1
