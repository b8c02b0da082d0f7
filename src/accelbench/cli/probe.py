"""``accelbench probe``: which features work on each device. Exits 0 when probing ran: a feature
that fails is a finding, not an error."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from accelbench.cli import optiongroups as groups
from accelbench.cli.common import add_saving_arguments
from accelbench.devices import Device, DeviceSet
from accelbench.errors import UsageError
from accelbench.probes import Feature
from accelbench.probes.engine import Cell, probe_record
from accelbench.probes.features import all_features, select_features
from accelbench.render.probe_table import probe_table
from accelbench.store.jsonfile import check_writable, save_record
from accelbench.store.keep import store_everywhere


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("probe", help="which features work on each device")
    groups.add_device_argument(parser, "all", "default: all")
    parser.add_argument("--feature", action="append", metavar="PATTERN",
                        help="probe only the features matching this wildcard, e.g. fft or 'sdpa:*' "
                        "(repeatable; see --list)")
    parser.add_argument("--skip-compile", action="store_true",
                        help="skip the torch.compile probes (inductor can take a minute on a CPU)")
    parser.add_argument("--list", action="store_true", help="list the features and exit")
    parser.add_argument("--json", action="store_true", help="print the result record as JSON")
    add_saving_arguments(parser, quiet=False, debug_help="show tracebacks of failing probes")
    parser.set_defaults(execute=execute)


def chosen_features(patterns: list[str] | None, skip_compile: bool) -> list[Feature]:
    features = all_features()
    try:
        chosen = select_features(features, patterns, ("compile",) if skip_compile else ())
    except LookupError as error:
        raise UsageError(f"no feature matches {error.args[0]!r}; known features: "
                         f"{', '.join(f.name for f in features)}") from None
    if not chosen:
        raise UsageError("nothing to probe: --skip-compile removed every feature --feature chose")
    return chosen


def _feature_list(features: list[Feature]) -> Table:
    table = Table(title="features accelbench probe tries", title_justify="left")
    for column in ("feature", "what", "devices"):
        table.add_column(column)
    for feature in features:
        table.add_row(feature.name, feature.summary, ", ".join(feature.kinds) or "all")
    return table


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    if args.list:
        Console().print(_feature_list(all_features()))
        return 0
    if args.output:
        check_writable(args.output)
    features = chosen_features(args.feature, args.skip_compile)
    devices = DeviceSet.current()
    chosen = devices.select(args.device)
    err = Console(stderr=True)
    options = {"device": args.device, "features": [f.name for f in features],
               "skip_compile": args.skip_compile}

    def show_traceback(device: Device, name: str, cell: Cell) -> None:
        if args.debug and cell.traceback:
            err.print(f"[bold]{name} on {device.name}[/bold]", highlight=False)
            err.print(cell.traceback, markup=False, highlight=False)

    live = err.status("probing") if err.is_terminal else contextlib.nullcontext()
    with live as status:
        def progress(device: Device, feature: Feature) -> None:
            if status is not None:
                status.update(f"probing {feature.name} on {device.name}")
        record = probe_record(devices, chosen, features, ["accelbench", *argv], options,
                              progress=progress, on_cell=show_traceback)

    saved = store_everywhere(record, args.db)
    if args.output:
        save_record(record, args.output)
    # With --json, stdout carries only the JSON; where it was saved goes to stderr.
    notes = err if args.json else Console()
    if args.json:
        sys.stdout.write(json.dumps(record.to_dict(), indent=1) + "\n")
    else:
        notes.print(probe_table(record))
    if args.output:
        notes.print(f"Result written to {args.output}", highlight=False)
    notes.print(f"Saved to {saved}", highlight=False)
    return 0
