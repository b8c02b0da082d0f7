"""``accelbench run``: time workloads in training and evaluation on the chosen devices."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from accelbench.cli import optiongroups as groups
from accelbench.cli.common import add_saving_arguments, terminate_as_exception
from accelbench.devices import DeviceSet
from accelbench.errors import UsageError
from accelbench.option_values import build_run_options, check_data
from accelbench.options import RunOptions
from accelbench.render.table import diagnosis_lines, energy_lines, run_table
from accelbench.results import RunRecord
from accelbench.runner import Case, Interrupted, plan, run_plan
from accelbench.store.jsonfile import check_writable, save_record, save_to_results_dir
from accelbench.store.keep import store_everywhere
from accelbench.suites import DEFAULT_SUITE


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="time workloads on devices")
    groups.add_workload_arguments(
        parser, f"workload names or wildcards (default: the '{DEFAULT_SUITE}' suite)", suite=True)
    groups.add_device_argument(parser, None, "default: auto for named workloads, all for a suite")
    groups.add_mode_argument(parser, ("train", "eval"))
    groups.add_stop_arguments(parser)
    groups.add_config_arguments(parser)
    groups.add_data_arguments(parser)
    groups.add_isolation_arguments(parser)
    parser.add_argument("--profile", action="store_true",
                        help="profile a few extra steps (torch.profiler) and diagnose each case: "
                        "launch-, compute-, memory-, input- or kernel-bound")
    parser.add_argument("--wide", action="store_true",
                        help="the full table (spread, FLOP/s, memory, input wait, repeats, profile)")
    add_saving_arguments(parser)
    parser.set_defaults(execute=execute)


def options_from_args(args: argparse.Namespace) -> RunOptions:
    return build_run_options(args.workloads, args.device, args.modes, **groups.run_keywords(args))


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    options = options_from_args(args)
    if args.output:
        check_writable(args.output)
    check_data(options)
    devices = DeviceSet.current()
    cases = plan(options, devices)
    if not cases:
        raise UsageError("nothing to run: no workload supports the requested modes")
    console = Console(stderr=True)
    with terminate_as_exception():
        try:
            record = _run_with_progress(options, devices, cases, argv, console, quiet=args.quiet)
        except Interrupted as stop:
            _finish(stop.record, args.output, args.db, args.wide)
            console.print(f"[yellow]Interrupted by {stop.signal_name}: the finished cases are saved."
                          "[/yellow]")
            return stop.exit_code
    _finish(record, args.output, args.db, args.wide)
    return 0 if all(case.ok for case in record.cases) else 1


def _finish(record: RunRecord, output: Path | None, db: Path | None, wide: bool = False) -> None:
    saved = store_everywhere(record, db)
    out = Console(width=None if sys.stdout.isatty() else 160)
    out.print(run_table(record, wide))
    for line in diagnosis_lines(record):
        out.print(line, highlight=False, markup=False)
    for line in energy_lines(record):
        out.print(line, style="dim", highlight=False)
    if output:
        save_record(record, output)
        out.print(f"Result written to {output}")
    out.print(f"Saved to {saved}")


def _run_with_progress(options: RunOptions, devices: DeviceSet, cases: list[Case],
                       argv: list[str], console: Console, quiet: bool) -> Any:
    command = ["accelbench", *argv]
    if quiet or not console.is_terminal and not sys.stderr.isatty():
        return run_plan(options, devices, cases, command, on_case=save_to_results_dir)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[phase]}"),
                  TimeElapsedColumn(), console=console, transient=True) as progress:
        tasks = {case: progress.add_task(case.label, total=1.0, phase="queued") for case in cases}

        def update(case: Case, phase: str, done: float, total: float | None) -> None:
            fraction = done / total if total else 0.0
            progress.update(tasks[case], completed=fraction if phase == "measure" else 0.0,
                            phase=phase)

        return run_plan(options, devices, cases, command, progress=update,
                        on_case=save_to_results_dir)
