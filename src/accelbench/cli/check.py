"""``accelbench check``: is the device computing the right numbers? Parity against a CPU reference."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from accelbench.cli import optiongroups as groups
from accelbench.cli.common import add_json_argument, add_saving_arguments
from accelbench.cli.driven import run_driven, show_record
from accelbench.devices import DeviceSet
from accelbench.options.check import (
    DEFAULT_CHECK_STEPS,
    REFERENCES,
    TINY_CHECK_STEPS,
    CheckOptions,
    default_check_steps,
)
from accelbench.options.values import build_run_options
from accelbench.render.check_table import check_table
from accelbench.render.fit import Prose
from accelbench.results import RunRecord
from accelbench.store.jsonfile import check_writable
from accelbench.workloads.suites import DEFAULT_SUITE


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("check", help="numerical parity of a device against the CPU")
    groups.add_workload_arguments(
        parser, f"workload names or wildcards (default: the {DEFAULT_SUITE} suite)")
    groups.add_device_argument(parser, "auto", "default auto")
    parser.add_argument("--reference", choices=REFERENCES, default="cpu-fp64",
                        help="what the candidate is compared with (default cpu-fp64)")
    # Not the stop group: parity trains a fixed number of steps on each side, no time budget.
    parser.add_argument("--steps", type=groups.whole_number, default=None,
                        help=f"training steps on each side (default {DEFAULT_CHECK_STEPS}; "
                        f"{TINY_CHECK_STEPS} at --size tiny)")
    parser.add_argument("--mode", choices=("train", "generate"), default="train",
                        help="train (default): the loss and output over training steps; "
                        "generate: the greedy tokens of a decoder, against the CPU's")
    groups.add_generation_arguments(parser)
    groups.add_config_arguments(parser)
    groups.add_isolation_arguments(parser, auto_batch=False, schedule=False, world=True)
    add_json_argument(parser)
    add_saving_arguments(parser)
    parser.set_defaults(execute=execute)


def options_from_args(args: argparse.Namespace) -> CheckOptions:
    run = build_run_options(args.workloads, args.device, args.mode, **groups.run_keywords(args))
    steps = args.steps if args.steps is not None else default_check_steps(run.size)
    return CheckOptions(run=run, reference=args.reference, steps=steps)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    options = options_from_args(args)
    run = options.run
    if args.output:
        check_writable(args.output)
    if run.threads:
        import torch

        torch.set_num_threads(run.threads)
    devices = DeviceSet.current()

    from accelbench.parity.check import run_check  # torch: only once the usage is known good

    def drive(on_case: Callable[[RunRecord], None]) -> RunRecord:
        return run_check(options, devices, ["accelbench", *argv], on_case=on_case, live=not args.quiet)

    def show(record: RunRecord, saved: Path) -> None:
        show_record(record, saved, args.output, args.json, _parts)

    return run_driven(drive, args.output, args.db, show)


def _parts(record: RunRecord) -> Iterator[Any]:
    """What check shows: its table, and a quantized precision's cost in full."""
    from accelbench.render.generation_detail import quality_lines

    yield check_table(record)
    yield from (Prose(line) for line in quality_lines(record))
