"""``accelbench run``: time workloads in training and evaluation on the chosen devices."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.cli import optiongroups as groups
from accelbench.cli.common import ExamplesHelpFormatter, add_json_argument, add_saving_arguments
from accelbench.errors import UsageError
from accelbench.options import RunOptions
from accelbench.options.values import build_run_options, check_data
from accelbench.workloads.suites import DEFAULT_SUITE

if TYPE_CHECKING:
    from accelbench.results import RunRecord

# Parsing a run's flags imports no numpy, scipy or torch (tests/cli/test_cli_imports.py): the
# results, the store, the renderers and the engine are imported once the command runs.


#: ``run --help``'s examples, kept as written (each line within 80 columns).
EXAMPLES = """\
examples:
  accelbench run --size tiny               # does every case work? (seconds)
  accelbench run mnist vae --device all    # every device, each against the CPU
  accelbench run 'resnet*' --precision fp32,bf16 --compile inductor,none
  accelbench run mnist --repeat            # 10 processes a case, for compare
  accelbench run nanogpt-char --mode generate --protocol llama-bench
  accelbench run timm:resnet18 --time-budget 30 --json > run.json
"""


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="time workloads on devices", epilog=EXAMPLES,
                                   formatter_class=ExamplesHelpFormatter)
    groups.add_workload_arguments(
        parser, f"workload names or wildcards (default: the '{DEFAULT_SUITE}' suite)", suite=True)
    groups.add_device_argument(parser, None, "default: auto for named workloads, all for a suite")
    groups.add_mode_argument(parser, ("train", "eval"), generate=True)
    groups.add_generation_arguments(parser)
    groups.add_stream_argument(parser)
    groups.add_stop_arguments(parser)
    groups.add_config_arguments(parser)
    groups.add_cudnn_benchmark_argument(parser)
    groups.add_data_arguments(parser)
    groups.add_isolation_arguments(parser, world=True)
    parser.add_argument("--profile", action="store_true",
                        help="profile a few extra steps (torch.profiler) and diagnose each case: "
                        "launch-, compute-, memory-, input- or kernel-bound")
    parser.add_argument("--wide", action="store_true",
                        help="the full table (spread, FLOP/s, memory, input wait, repeats, stop rule, "
                        "first-use costs, profile)")
    groups.add_against_argument(parser)
    add_json_argument(parser)
    add_saving_arguments(parser)
    parser.set_defaults(execute=execute)


def options_from_args(args: argparse.Namespace) -> RunOptions:
    for name in args.workloads:
        if groups.looks_like_source(name):
            raise UsageError(f"{name!r} is a source of shared results, not a workload: give it as "
                             f"--against {name} (one source per --against)")
    return build_run_options(args.workloads, args.device, args.modes, **groups.run_keywords(args))


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from accelbench.cli.driven import run_driven
    from accelbench.devices import DeviceSet
    from accelbench.store.jsonfile import check_writable

    options = options_from_args(args)
    if options.warm_worker:  # its start-up overlaps ours (engine/launchers/warm.py)
        from accelbench.engine.launchers.warm import start_ahead

        start_ahead()
    if args.output:
        check_writable(args.output)
    check_data(options)
    if args.against:
        from accelbench.sharing.sources import check_sources

        check_sources(args.against)  # a missing bundle is known before a long run
    from accelbench.engine.case import plan  # torch: only once the usage is known good
    from accelbench.engine.runner import run_plan

    devices = DeviceSet.current()
    cases = plan(options, devices)
    if not cases:
        raise UsageError("nothing to run: no workload supports the requested modes")

    def drive(on_case: Callable[[RunRecord], None]) -> RunRecord:
        return run_plan(options, devices, cases, ["accelbench", *argv], on_case=on_case,
                        live=not args.quiet)

    return run_driven(drive, args.output, args.db, lambda record, saved: _show(
        record, saved, args.output, args.wide, args.against, args.json))


def _show(record: RunRecord, saved: Path, output: Path | None, wide: bool, against: list[str],
          as_json: bool = False) -> None:
    from accelbench.cli.compare import print_against
    from accelbench.cli.console import make_console, print_path
    from accelbench.render.run_output import run_renderables

    if as_json:  # stdout holds the JSON only; with --against, the placement among peers in it
        from accelbench.cli.compare import place_against
        from accelbench.cli.driven import show_json
        from accelbench.render.json_views import peers_view

        placed = place_against([(record.run_id, record)], against, quiet=True) if against else None
        view = peers_view(placed.comparisons, placed.loaded, placed.overall) if placed else None
        show_json(record, saved, output, {"against": view} if view is not None else None)
        return
    out = make_console()
    for part in run_renderables(record, wide):
        out.print(part)
    if output:
        print_path(out, "Result written to", output)
    print_path(out, "Saved to", saved)
    if against:
        print_against(out, [(record.run_id, record)], against)
