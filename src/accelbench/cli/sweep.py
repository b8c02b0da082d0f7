"""``accelbench sweep WORKLOAD --batch-size 1,2,4,...,N``: throughput, step time and memory per
batch size and device; where each device saturates and where an accelerator overtakes the CPU."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench.cli import optiongroups as groups
from accelbench.cli.common import add_saving_arguments
from accelbench.cli.driven import run_driven
from accelbench.devices import DeviceSet
from accelbench.errors import UsageError
from accelbench.options import RunOptions
from accelbench.options.values import build_run_options, check_data
from accelbench.render.steady import break_even_lines, sustained_lines
from accelbench.render.sweep_table import definition, summary_lines, sweep_table
from accelbench.results import RunRecord
from accelbench.store.jsonfile import check_writable
from accelbench.sweeps.analysis import parse_batch_sizes


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
    groups.add_cudnn_benchmark_argument(parser)
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
    log = not args.quiet and not console.is_terminal  # a line a case where no live display runs

    from accelbench.sweeps.run import run_sweep  # torch: only once the usage is known good

    def drive(on_case: Callable[[RunRecord], None]) -> RunRecord:
        def keep(record: RunRecord) -> None:
            on_case(record)
            if log:
                done = record.cases[-1]
                console.print(f"batch {done.batch_size}: {len(record.cases)} case(s) done",
                              highlight=False)

        return run_sweep(options, DeviceSet.current(), args.batch_size, ["accelbench", *argv],
                         on_case=keep, live=not args.quiet)

    return run_driven(drive, args.output, args.db, lambda record, saved: _show(
        record, saved, args.output))


def _show(record: RunRecord, saved: Path, output: Path | None) -> None:
    out = Console(width=None if sys.stdout.isatty() else 100)
    out.print(sweep_table(record))
    for line in [*summary_lines(record), *sustained_lines(record), *break_even_lines(record)]:
        out.print(line, highlight=False, markup=False)
    out.print(definition(), style="dim", highlight=False)
    if output:
        out.print(f"Result written to {output}")
    out.print(f"Saved to {saved}")
