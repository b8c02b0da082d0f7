"""``accelbench sweep WORKLOAD --batch-size 1,2,4,...,N``: throughput, step time and memory per
batch size and device; where each device saturates and where an accelerator overtakes the CPU."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from accelbench.cli import optiongroups as groups
from accelbench.cli.common import add_json_argument, add_saving_arguments
from accelbench.cli.console import make_console
from accelbench.cli.driven import run_driven, show_record
from accelbench.devices import DeviceSet
from accelbench.errors import UsageError
from accelbench.options import RunOptions
from accelbench.options.values import build_run_options, check_data
from accelbench.render.fit import Prose
from accelbench.render.generation_sweep import (
    PROMPT_SWEEP_NOTE,
    is_prompt_sweep,
    prompt_sweep_lines,
    prompt_sweep_table,
)
from accelbench.render.steady import break_even_lines, sustained_lines
from accelbench.render.sweep_table import definition, summary_lines, sweep_table
from accelbench.results import RunRecord
from accelbench.store.jsonfile import check_writable
from accelbench.sweeps.analysis import parse_batch_sizes


def _values(flag: str) -> Callable[[str], tuple[int, ...]]:
    def parse(text: str) -> tuple[int, ...]:
        try:
            return parse_batch_sizes(text, flag)
        except UsageError as error:  # argparse reports only its own error type as a usage line
            raise argparse.ArgumentTypeError(str(error).removeprefix(f"{flag}: ")) from None

    return parse


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("sweep", help="throughput per batch size and device; saturation "
                                   "and the CPU crossover")
    groups.add_workload_arguments(
        parser, "workload names, wildcards or model names (timm:resnet18, hf:bert, ...)", nargs="+")
    parser.add_argument("--batch-size", type=_values("--batch-size"), metavar="LIST",
                        help="batch sizes: 1,4,16 or 1,2,4,...,256 (with --prompt-len: one batch "
                        "size, default 1)")
    parser.add_argument("--prompt-len", type=_values("--prompt-len"), metavar="LIST",
                        help="with --mode generate: sweep the prompt length instead, 128,256,512 "
                        "or 128,256,...,1024: decode speed and memory against context, and where "
                        "memory runs out")
    parser.add_argument("--new-tokens", default=None, metavar="N",
                        help="with --prompt-len: tokens generated per sequence (default 128, or half the "
                        "model's context where less)")
    groups.add_device_argument(parser, "all", "default: all")
    groups.add_mode_argument(parser, ("train",), generate=True)
    groups.add_stream_argument(parser)
    groups.add_protocol_argument(parser)
    groups.add_stop_arguments(parser)
    groups.add_config_arguments(parser, batch_size=False)
    groups.add_cudnn_benchmark_argument(parser)
    groups.add_data_arguments(parser)
    # No --auto-batch: running out of memory at a batch size is what a sweep finds.
    groups.add_isolation_arguments(parser, auto_batch=False)
    add_json_argument(parser)
    add_saving_arguments(parser)
    parser.set_defaults(execute=execute)


def sweep_axis(args: argparse.Namespace) -> tuple[str, tuple[int, ...], int | None]:
    """(the axis swept, its values, the one batch size of a prompt-length sweep). One prompt
    length (and --new-tokens) with a list of batch sizes is a batch-size sweep of generation."""
    modes = args.modes.split(",") if isinstance(args.modes, str) else list(args.modes)
    prompts, batches = args.prompt_len, args.batch_size
    if prompts is not None and modes != ["generate"]:
        raise UsageError("--prompt-len sweeps generation: give --mode generate (and no other mode)")
    if prompts is not None and (len(prompts) > 1 or batches is None):
        if batches is not None and len(batches) > 1:
            raise UsageError("sweep one axis at a time: with a --prompt-len list, --batch-size takes "
                             "one batch size")
        return "prompt_len", prompts, batches[0] if batches else None
    if batches is None:
        raise UsageError("sweep needs --batch-size LIST (or --prompt-len LIST with --mode "
                         "generate)")
    return "batch_size", batches, None


def options_from_args(args: argparse.Namespace) -> RunOptions:
    # --batch-size (or --prompt-len) is the sweep's list, not the value of every case; a batch
    # sweep of generation keeps its one prompt length
    axis, _, batch = sweep_axis(args)
    excluded = ("batch_size", "prompt_len") if axis == "prompt_len" else ("batch_size",)
    return build_run_options(args.workloads, args.device, args.modes, batch_size=batch,
                             **groups.run_keywords(args, exclude=excluded))


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    options = options_from_args(args)
    if args.output:
        check_writable(args.output)
    check_data(options)
    console = make_console(stderr=True)
    log = not args.quiet and not console.is_terminal  # a line a case where no live display runs

    from accelbench.sweeps.run import AXES, run_sweep  # torch: only once the usage is known good

    axis, values, _ = sweep_axis(args)

    def drive(on_case: Callable[[RunRecord], None]) -> RunRecord:
        def keep(record: RunRecord) -> None:
            on_case(record)
            if log:
                done = record.cases[-1]
                console.print(f"{AXES[axis]} {getattr(done, axis)}: {len(record.cases)} case(s) "
                              "done", highlight=False)

        return run_sweep(options, DeviceSet.current(), values, ["accelbench", *argv],
                         on_case=keep, live=not args.quiet, axis=axis)

    return run_driven(drive, args.output, args.db, lambda record, saved: _show(
        record, saved, args.output, args.json))


def _show(record: RunRecord, saved: Path, output: Path | None, as_json: bool = False) -> None:
    show_record(record, saved, output, as_json, _parts)


def _parts(record: RunRecord) -> Iterator[Any]:
    """What sweep shows: the batch or prompt sweep's table, its lines, and what it means."""
    if is_prompt_sweep(record):
        yield prompt_sweep_table(record)
        lines, note = prompt_sweep_lines(record), PROMPT_SWEEP_NOTE
    else:
        yield sweep_table(record)
        lines, note = summary_lines(record), definition()
    yield from (Prose(line) for line in [*lines, *sustained_lines(record), *break_even_lines(record)])
    yield Prose(note, "dim")
