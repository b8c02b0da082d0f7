"""``accelbench check``: is the device computing the right numbers? Parity against a CPU reference."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench.check import DEFAULT_CHECK_STEPS, CheckOptions, run_check
from accelbench.cli.common import add_isolation_arguments, add_saving_arguments, positive_int
from accelbench.cli.driven import run_driven
from accelbench.cli.run import add_config_arguments, config_fields, selected_workloads
from accelbench.devices import DEVICE_HELP, DeviceSet
from accelbench.options import RunOptions, StopRule
from accelbench.parity import REFERENCES
from accelbench.render.check_table import check_table
from accelbench.results import RunRecord
from accelbench.store.jsonfile import check_writable


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("check", help="numerical parity of a device against the CPU")
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                        help="workload names or wildcards (default: the quick suite)")
    parser.add_argument("--workload-file", type=Path, action="append", default=[],
                        metavar="FILE.py", help="load your own workloads")
    parser.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    parser.add_argument("--reference", choices=REFERENCES, default="cpu-fp64",
                        help="what the candidate is compared with (default cpu-fp64)")
    parser.add_argument("--steps", type=positive_int, default=DEFAULT_CHECK_STEPS,
                        help=f"training steps on each side (default {DEFAULT_CHECK_STEPS})")
    parser.add_argument("--batch-size", type=positive_int, help="override every batch size")
    parser.add_argument("--threads", type=positive_int, help="CPU threads torch may use")
    add_config_arguments(parser)
    add_isolation_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_saving_arguments(parser, quiet=False)
    parser.set_defaults(execute=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    workloads, _ = selected_workloads(args)
    run = RunOptions(workloads=workloads, device=args.device, modes=("train",),
                     stop=StopRule("steps", args.steps), isolation=args.isolation,
                     case_timeout=args.case_timeout,
                     workload_files=tuple(str(Path(p).resolve()) for p in args.workload_file),
                     **config_fields(args))
    options = CheckOptions(run=run, reference=args.reference, steps=args.steps)
    if args.output:
        check_writable(args.output)
    if run.threads:
        import torch

        torch.set_num_threads(run.threads)
    devices = DeviceSet.current()

    def drive(on_case: Callable[[RunRecord], None]) -> RunRecord:
        return run_check(options, devices, ["accelbench", *argv], on_case=on_case, live=True)

    def show(record: RunRecord, saved: Path) -> None:
        if args.json:
            print(json.dumps(record.to_dict(), indent=1, default=str))
            return
        out = Console(width=None if sys.stdout.isatty() else 160)
        out.print(check_table(record))
        out.print(f"Saved to {saved}")

    return run_driven(drive, args.output, args.db, show)
