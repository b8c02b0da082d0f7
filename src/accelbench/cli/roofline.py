"""``accelbench roofline``: the ceilings of each device (matmul FLOP/s per precision, memory
bandwidth, launch latency, host<->device transfers), cached per device like the peak."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any

from accelbench.cli.common import add_report_arguments
from accelbench.cli.console import make_console
from accelbench.cli.optiongroups import number
from accelbench.devices import DEVICE_HELP, DeviceSet
from accelbench.devices.precisions import MATMUL_PRECISIONS
from accelbench.errors import UsageError
from accelbench.files import write_atomic
from accelbench.measure.loop.stop import DEFAULT_SUSTAINED_INTERVAL_S
from accelbench.options.values import names, stop_rule
from accelbench.store.jsonfile import check_writable

if TYPE_CHECKING:
    from accelbench.devices import Device
    from accelbench.measure.ceilings.roofline import Roofline


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("roofline", help="measured ceilings of each device")
    parser.add_argument("--device", default="all", help=f"{DEVICE_HELP} (default: all)")
    parser.add_argument("--refresh", action="store_true",
                        help="measure again and replace the cached figures")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--sustained", type=number, metavar="MINUTES",
                        help="also hold each matrix-product peak (of --precision) and the "
                        "bandwidth for MINUTES each, and store the sustained figures beside the "
                        "burst ones (%% peak stays against the burst peak; run --wide shows both)")
    parser.add_argument("--sustained-interval", type=number, metavar="SECONDS",
                        help=f"with --sustained: throughput and sensors per interval (default "
                        f"{DEFAULT_SUSTAINED_INTERVAL_S:g})")
    parser.add_argument("--precision", default="fp32", metavar="LIST",
                        help=f"with --sustained: the matrix-product precisions held, a comma list "
                        f"of {', '.join(MATMUL_PRECISIONS)} (default fp32)")
    add_report_arguments(parser)
    parser.set_defaults(execute=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from accelbench.measure.ceilings.roofline import device_roofline  # torch: only to run the command
    from accelbench.render.roofline_table import roofline_table

    held = sustained_plan(args)
    if args.output:
        check_writable(args.output)
    devices = DeviceSet.current().select(args.device)
    err = make_console(stderr=True)
    rooflines = []
    for device in devices:
        with err.status(f"measuring the roofline of {device.name}") \
                if err.is_terminal and not args.quiet else contextlib.nullcontext():
            roofline = device_roofline(device, refresh=args.refresh)
        if held is not None:
            roofline = _hold(device, roofline, *held, quiet=args.quiet or not err.is_terminal)
        rooflines.append(roofline)
    text = json.dumps([r.to_dict() for r in rooflines], indent=1) + "\n"
    if args.output:
        write_atomic(args.output, text)
    if args.json:
        sys.stdout.write(text)
        return 0
    console = make_console()
    for roofline in rooflines:
        console.print(roofline_table(roofline))
    return 0


def sustained_plan(args: argparse.Namespace) -> tuple[float, float, tuple[str, ...]] | None:
    """(seconds, interval, precisions) of ``--sustained``, checked as ``run`` checks it; None
    without it."""
    precisions = names(args.precision, "--precision")
    unknown = [name for name in precisions if name not in MATMUL_PRECISIONS]
    if unknown or not precisions:
        raise UsageError(f"--precision {args.precision!r} is not allowed; allowed: a comma list of "
                         f"{', '.join(MATMUL_PRECISIONS)}")
    if args.sustained is None:
        if args.sustained_interval is not None or args.precision != "fp32":
            raise UsageError("--sustained-interval and --precision need --sustained MINUTES")
        return None
    rule = stop_rule(sustained=args.sustained, sustained_interval=args.sustained_interval)
    return rule.value, rule.interval, precisions


def _hold(device: Device, roofline: Roofline, seconds: float, interval: float,
          precisions: tuple[str, ...], quiet: bool) -> Roofline:
    """Hold the peaks on ``device``, judge each (against its own first intervals), and store
    them beside its burst figures, each with its share of the stored burst figure."""
    from accelbench.measure.ceilings.held import hold_peaks
    from accelbench.measure.ceilings.roofline import remember_sustained, stored_burst
    from accelbench.results.sustained import SustainedRecord

    err = make_console(stderr=True)

    def progress(figure: str, done: float, total: float) -> None:
        if not quiet:
            err.print(f"holding {figure} on {device.name}: {done:.0f}/{total:.0f} s", end="\r")

    series = hold_peaks(device, seconds, interval, precisions, progress=progress)
    if not quiet:
        err.print()
    return remember_sustained(device, {
        figure: SustainedRecord.judge(held, figure).beside(stored_burst(roofline, figure)).to_dict()
        for figure, held in series.items()})

