"""``accelbench run``: time workloads in training and evaluation on the chosen devices."""

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
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from accelbench.cli.driven import run_driven
from accelbench.data.placement import source_kind
from accelbench.devices import DEVICE_HELP, DeviceSet
from accelbench.errors import UsageError
from accelbench.options import (
    DATA_MODES,
    DEFAULT_TARGET_CI_PCT,
    DEFAULT_TIME_BUDGET_S,
    DEFAULT_WARMUP_STEPS,
    RunOptions,
    StopRule,
)
from accelbench.render.table import diagnosis_lines, energy_lines, run_table
from accelbench.repeat import DEFAULT_REPEATS
from accelbench.results import RunRecord
from accelbench.runner import plan, run_plan
from accelbench.store.jsonfile import check_writable
from accelbench.suites import DEFAULT_SUITE, suite_workloads
from accelbench.userfile import load_workload_file
from accelbench.workloads import get_workload_class, match_workloads
from accelbench.workloads.base import DataOptions


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="time workloads on devices")
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                        help=f"workload names or wildcards (default: the '{DEFAULT_SUITE}' suite)")
    parser.add_argument("--suite", default=None, help="run a named suite: quick or full")
    parser.add_argument("--workload-file", type=Path, action="append", default=[],
                        metavar="FILE.py", help="load your own workloads (registered with "
                        "@accelbench.register); without names, runs every workload it defines")
    parser.add_argument("--device", default=None,
                        help=f"{DEVICE_HELP} (default: auto for named workloads, all for a suite)")
    parser.add_argument("--mode", type=comma_list, default=("train", "eval"),
                        help="train, eval or train,eval (default)")
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument("--steps", type=positive_int, help="measure exactly N steps after warm-up")
    stop.add_argument("--time-budget", type=positive_float, metavar="SECONDS",
                      help=f"measure for about this long per case (default {DEFAULT_TIME_BUDGET_S:g})")
    stop.add_argument("--epochs", type=positive_int,
                      help="measure N full epochs, as the published tables did")
    parser.add_argument("--target-ci", type=non_negative_float, metavar="PCT",
                        help="with a time budget, stop as soon as the median step time's 95%% CI "
                        f"is within +-PCT%% of the median (default {DEFAULT_TARGET_CI_PCT:g}; 0 "
                        "measures the whole budget)")
    parser.add_argument("--warmup", type=non_negative_int, default=DEFAULT_WARMUP_STEPS,
                        help=f"warm-up steps, excluded from the figures (default "
                        f"{DEFAULT_WARMUP_STEPS})")
    parser.add_argument("--batch-size", type=positive_int, help="override every batch size")
    parser.add_argument("--threads", type=positive_int, help="CPU threads torch may use")
    parser.add_argument("--data", choices=DATA_MODES, default="synthetic",
                        help="synthetic: host batches copied every step (default); "
                        "synthetic-device: batches kept on the device (pure compute); "
                        "real: a data set from --data-dir")
    parser.add_argument("--data-dir", type=Path, help="folder with real data sets")
    parser.add_argument("--workers", type=non_negative_int, default=0,
                        help="data-loader worker processes for real data (default 0)")
    add_config_arguments(parser)
    parser.add_argument("--isolation", choices=("process", "none"), default="process",
                        help="run each case in its own worker process (default) or inline")
    parser.add_argument("--case-timeout", type=positive_float, default=1800.0, metavar="SECONDS",
                        help="stop a case that takes longer than this (default 1800)")
    parser.add_argument("--auto-batch", action="store_true",
                        help="on out-of-memory, halve the batch until it fits")
    parser.add_argument("--cooldown", type=non_negative_float, default=0.0, metavar="SECONDS",
                        help="wait this long between cases (thermal recovery)")
    parser.add_argument("--repeat", type=positive_int, nargs="?", const=DEFAULT_REPEATS, default=1,
                        metavar="N", help="run each case in N fresh worker processes, interleaved "
                        f"(alone: {DEFAULT_REPEATS}); compare needs 4+ a side to call a difference")
    parser.add_argument("--profile", action="store_true",
                        help="profile a few extra steps (torch.profiler) and diagnose each case: "
                        "launch-, compute-, memory-, input- or kernel-bound")
    parser.add_argument("--wide", action="store_true",
                        help="the full table (spread, FLOP/s, memory, input wait, repeats, profile)")
    add_saving_arguments(parser)
    parser.set_defaults(execute=execute)


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by run and check: what is built and how it computes."""
    parser.add_argument("--precision", type=comma_list, default=("fp32",),
                        help="fp32, tf32, bf16, fp16, amp-bf16, amp-fp16, or a comma list "
                        "(default fp32)")
    parser.add_argument("--compile", nargs="?", const="inductor", default=None, type=comma_list,
                        metavar="BACKEND", help="torch.compile the model (default back end: "
                        "inductor; a comma list runs each)")
    parser.add_argument("--channels-last", action="store_true",
                        help="channels-last memory format for models and 4-D inputs")
    parser.add_argument("--size", choices=("published", "tiny"), default="published",
                        help="workload size: the published configuration or a tiny one")


def selected_workloads(args: argparse.Namespace) -> tuple[tuple[str, ...], bool]:
    """(workload names, whether they were named) from names, --workload-file and --suite."""
    if args.workloads and getattr(args, "suite", None):
        raise UsageError("give workload names or --suite, not both")
    from_files = [name for path in args.workload_file for name in load_workload_file(path)]
    if args.workloads:
        return tuple(match_workloads(args.workloads)), True
    if from_files:
        return tuple(from_files), True
    return suite_workloads(getattr(args, "suite", None) or DEFAULT_SUITE), False


def config_fields(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "precisions": tuple(args.precision),
        "compile_backends": _backends(args.compile),
        "channels_last": args.channels_last,
        "size": args.size,
        "batch_size": args.batch_size,
        "threads": args.threads,
    }


def options_from_args(args: argparse.Namespace) -> RunOptions:
    workloads, named = selected_workloads(args)
    if args.steps:
        stop = StopRule("steps", args.steps, args.target_ci)
    elif args.epochs:
        stop = StopRule("epochs", args.epochs, args.target_ci)
    else:
        stop = StopRule("time", args.time_budget or DEFAULT_TIME_BUDGET_S, args.target_ci)
    return RunOptions(
        workloads=workloads,
        device=args.device or ("auto" if named else "all"),
        modes=tuple(args.mode),
        stop=stop,
        warmup_steps=args.warmup,
        data=args.data,
        data_dir=args.data_dir,
        workers=args.workers,
        workload_files=tuple(str(Path(p).resolve()) for p in args.workload_file),
        isolation=args.isolation,
        case_timeout=args.case_timeout,
        auto_batch=args.auto_batch,
        cooldown=args.cooldown,
        repeat=args.repeat,
        profile=args.profile,
        **config_fields(args),
    )


def _backends(value: tuple[str, ...] | str | None) -> tuple[str, ...]:
    if value is None:
        return ("",)
    return comma_list(value) if isinstance(value, str) else tuple(value)


def check_data(options: RunOptions) -> None:
    data = DataOptions(kind=source_kind(options.data), data_dir=options.data_dir)
    for name in options.workloads:
        workload = get_workload_class(name)(options.size)
        for mode in options.modes:
            if mode in workload.modes:
                workload.check_data(mode, data)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    options = options_from_args(args)
    if args.output:
        check_writable(args.output)
    check_data(options)
    devices = DeviceSet.current()
    cases = plan(options, devices)
    if not cases:
        raise UsageError("nothing to run: no workload supports the requested modes")

    def drive(on_case: Callable[[RunRecord], None]) -> RunRecord:
        return run_plan(options, devices, cases, ["accelbench", *argv], on_case=on_case,
                        live=not args.quiet)

    return run_driven(drive, args.output, args.db, lambda record, saved: _show(
        record, saved, args.output, args.wide))


def _show(record: RunRecord, saved: Path, output: Path | None, wide: bool) -> None:
    out = Console(width=None if sys.stdout.isatty() else 160)
    out.print(run_table(record, wide))
    for line in diagnosis_lines(record):
        out.print(line, highlight=False, markup=False)
    for line in energy_lines(record):
        out.print(line, style="dim", highlight=False)
    if output:
        out.print(f"Result written to {output}")
    out.print(f"Saved to {saved}")
