"""``accelbench doctor``: what this machine has and what is wrong. Always exits 0 when it ran."""

from __future__ import annotations

import argparse
import json
from typing import Any

from accelbench.cli.common import add_json_argument, add_quiet_argument
from accelbench.cli.console import make_console
from accelbench.devices.doctor import doctor_report
from accelbench.render.doctor import render_doctor


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("doctor", help="show devices, builds and what is missing")
    add_json_argument(parser, "print the report as JSON")
    add_quiet_argument(parser, "the devices only: no Python, torch and CPU lines")
    parser.set_defaults(execute=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    report = doctor_report()
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        make_console().print(render_doctor(report, devices_only=args.quiet))
    return 0
