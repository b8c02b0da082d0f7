"""``accelbench roofline``: the ceilings of each device (matmul FLOP/s per precision, memory
bandwidth, launch latency, host<->device transfers), cached per device like the peak."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from rich.console import Console

from accelbench.cli.common import add_report_arguments
from accelbench.devices import DEVICE_HELP, DeviceSet
from accelbench.files import write_atomic
from accelbench.store.jsonfile import check_writable


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("roofline", help="measured ceilings of each device")
    parser.add_argument("--device", default="all", help=f"{DEVICE_HELP} (default: all)")
    parser.add_argument("--refresh", action="store_true",
                        help="measure again and replace the cached figures")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_report_arguments(parser)
    parser.set_defaults(execute=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from accelbench.measure.roofline import device_roofline  # torch: only to run the command
    from accelbench.render.roofline_table import roofline_table

    if args.output:
        check_writable(args.output)
    devices = DeviceSet.current().select(args.device)
    err = Console(stderr=True)
    rooflines = []
    for device in devices:
        with err.status(f"measuring the roofline of {device.name}") \
                if err.is_terminal and not args.quiet else contextlib.nullcontext():
            rooflines.append(device_roofline(device, refresh=args.refresh))
    text = json.dumps([r.to_dict() for r in rooflines], indent=1) + "\n"
    if args.output:
        write_atomic(args.output, text)
    if args.json:
        sys.stdout.write(text)
        return 0
    console = Console()
    for roofline in rooflines:
        console.print(roofline_table(roofline))
    return 0

