"""``accelbench sweep WORKLOAD --batch-size 1,2,4,...,N``: throughput, step time and memory per
batch size and device; where each device saturates and where an accelerator overtakes the CPU."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench.cli.common import (
    add_saving_arguments,
    comma_list,
    non_negative_int,
    positive_float,
    positive_int,
)
from accelbench.cli.driven import run_driven
from accelbench.cli.run import add_config_arguments, check_data
from accelbench.devices import DEVICE_HELP, DeviceSet
from accelbench.errors import UsageError
from accelbench.options import DEFAULT_TIME_BUDGET_S, DEFAULT_WARMUP_STEPS, RunOptions, StopRule
from accelbench.render.sweep_table import definition, summary_lines, sweep_table
from accelbench.results import RunRecord
from accelbench.store.jsonfile import check_writable
from accelbench.sweep_analysis import parse_batch_sizes
from accelbench.sweep_run import run_sweep
from accelbench.userfile import load_workload_file
from accelbench.workloads import match_workloads


def _batch_sizes(text: str) -> tuple[int, ...]:
    try:
        return parse_batch_sizes(text)
    except UsageError as error:  # argparse reports only its own error type as a usage line
        raise argparse.ArgumentTypeError(str(error).removeprefix("--batch-size: ")) from None


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("sweep", help="throughput per batch size and device; saturation "
                                   "and the CPU crossover")
    parser.add_argument("workloads", nargs="+", metavar="WORKLOAD",
                        help="workload names, wildcards or model names (timm:resnet18, hf:bert, ...)")
    parser.add_argument("--batch-size", required=True, type=_batch_sizes, metavar="LIST",
                        help="batch sizes: 1,4,16 or 1,2,4,...,256")
    parser.add_argument("--workload-file", type=Path, action="append", default=[], metavar="FILE.py",
                        help="load your own workloads first")
    parser.add_argument("--device", default="all", help=f"{DEVICE_HELP} (default: all)")
    parser.add_argument("--mode", type=comma_list, default=("train",),
                        help="train (default), eval or train,eval")
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument("--steps", type=positive_int, help="measure exactly N steps per case")
    stop.add_argument("--time-budget", type=positive_float, metavar="SECONDS",
                      help=f"measure about this long per case (default {DEFAULT_TIME_BUDGET_S:g})")
    parser.add_argument("--warmup", type=non_negative_int, default=DEFAULT_WARMUP_STEPS)
    parser.add_argument("--threads", type=positive_int, help="CPU threads torch may use")
    add_config_arguments(parser)
    parser.add_argument("--isolation", choices=("process", "none"), default="process")
    parser.add_argument("--case-timeout", type=positive_float, default=1800.0, metavar="SECONDS")
    add_saving_arguments(parser)
    parser.set_defaults(execute=execute)


def options_from_args(args: argparse.Namespace) -> RunOptions:
    files = tuple(str(p.resolve()) for p in args.workload_file)
    for path in args.workload_file:
        load_workload_file(path)
    stop = StopRule("steps", args.steps) if args.steps else StopRule(
        "time", args.time_budget or DEFAULT_TIME_BUDGET_S)
    return RunOptions(
        workloads=tuple(match_workloads(args.workloads)), device=args.device, modes=tuple(args.mode),
        stop=stop, warmup_steps=args.warmup, threads=args.threads, workload_files=files,
        isolation=args.isolation, case_timeout=args.case_timeout,
        precisions=tuple(args.precision), compile_backends=tuple(args.compile or ("",)),
        channels_last=args.channels_last, size=args.size,
    )


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    options = options_from_args(args)
    if args.output:
        check_writable(args.output)
    check_data(options)
    console = Console(stderr=True)
    log = not args.quiet and not console.is_terminal  # a line a case where no live display runs

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
    for line in summary_lines(record):
        out.print(line, highlight=False, markup=False)
    out.print(definition(), style="dim", highlight=False)
    if output:
        out.print(f"Result written to {output}")
    out.print(f"Saved to {saved}")
