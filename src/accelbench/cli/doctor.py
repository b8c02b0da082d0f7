"""``accelbench doctor``: what this machine has and what is wrong. Always exits 0 when it ran."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console

from accelbench.devices.doctor import doctor_report
from accelbench.render.doctor import render_doctor


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("doctor", help="show devices, builds and what is missing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(execute=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    report = doctor_report()
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        Console().print(render_doctor(report))
    return 0
