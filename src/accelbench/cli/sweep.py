"""``accelbench sweep WORKLOAD --batch-size 1,2,4,...,N``: throughput, step time and memory per
batch size and device; where each device saturates and where an accelerator overtakes the CPU."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench.cli import optiongroups as groups
from accelbench.cli.common import add_saving_arguments, terminate_as_exception
from accelbench.devices import DeviceSet
from accelbench.errors import UsageError
from accelbench.option_values import build_run_options, check_data
from accelbench.options import RunOptions
from accelbench.render.sweep_table import definition, summary_lines, sweep_table
from accelbench.results import RunRecord
from accelbench.runner import Interrupted
from accelbench.store.jsonfile import check_writable, save_record, save_to_results_dir
from accelbench.store.keep import store_everywhere
from accelbench.sweep_analysis import parse_batch_sizes
from accelbench.sweep_run import run_sweep


def _batch_sizes(text: str) -> tuple[int, ...]:
    try:
        return parse_batch_sizes(text)
    except UsageError as error:  # argparse reports only its own error type as a usage line
        raise argparse.ArgumentTypeError(str(error).removeprefix("--batch-size: ")) from None


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("sweep", help="throughput per batch size and device; saturation "
                                   "and the CPU crossover")
    groups.add_workload_arguments(
        parser, "workload names, wildcards or model names (timm:resnet18, hf:bert, ...)", nargs="+")
    parser.add_argument("--batch-size", required=True, type=_batch_sizes, metavar="LIST",
                        help="batch sizes: 1,4,16 or 1,2,4,...,256")
    groups.add_device_argument(parser, "all", "default: all")
    groups.add_mode_argument(parser, ("train",))
    groups.add_stop_arguments(parser)
    groups.add_config_arguments(parser, batch_size=False)
    groups.add_data_arguments(parser)
    # No --auto-batch: running out of memory at a batch size is what a sweep finds.
    groups.add_isolation_arguments(parser, auto_batch=False)
    add_saving_arguments(parser)
    parser.set_defaults(execute=execute)


def options_from_args(args: argparse.Namespace) -> RunOptions:
    # --batch-size is the sweep's list, not the one batch size of every case
    return build_run_options(args.workloads, args.device, args.modes,
                             **groups.run_keywords(args, exclude=("batch_size",)))


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    options = options_from_args(args)
    if args.output:
        check_writable(args.output)
    check_data(options)
    console = Console(stderr=True)

    def progress_line(record: RunRecord) -> None:
        save_to_results_dir(record)
        if not args.quiet:
            done = record.cases[-1]
            console.print(f"batch {done.batch_size}: {len(record.cases)} case(s) done", highlight=False)

    with terminate_as_exception():
        try:
            record = run_sweep(options, DeviceSet.current(), args.batch_size, ["accelbench", *argv],
                               on_case=progress_line)
        except Interrupted as stop:
            _finish(stop.record, args.output, args.db)
            return stop.exit_code
    _finish(record, args.output, args.db)
    return 0 if all(case.ok for case in record.cases) else 1


def _finish(record: RunRecord, output: Path | None, db: Path | None) -> None:
    saved = store_everywhere(record, db)
    out = Console(width=None if sys.stdout.isatty() else 100)
    out.print(sweep_table(record))
    for line in summary_lines(record):
        out.print(line, highlight=False, markup=False)
    out.print(definition(), style="dim", highlight=False)
    if output:
        save_record(record, output)
        out.print(f"Result written to {output}")
    out.print(f"Saved to {saved}")
