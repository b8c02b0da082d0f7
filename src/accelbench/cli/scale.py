"""``accelbench scale``: training throughput at 1, 2, 4 ... processes under DDP (or FSDP)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelbench.cli import optiongroups as groups
from accelbench.cli.common import (
    add_json_argument,
    add_saving_arguments,
    non_negative_int,
    positive_float,
    positive_int,
)
from accelbench.cli.driven import run_driven, show_record
from accelbench.options.scale import DEFAULT_TIMEOUT_S, Rendezvous, ScaleOptions
from accelbench.options.values import stop_rule
from accelbench.results import RunRecord
from accelbench.store.jsonfile import check_writable

HELP = "how a workload's training scales over processes and machines"
#: ``--debug`` (cli.build_parser) also streams torchrun's output.
DEBUG_HELP = "show tracebacks and torchrun's output as it comes"


def process_counts(text: str) -> tuple[int, ...]:
    """``1,2,4``: positive whole numbers, each once, in the order given."""
    counts: list[int] = []
    for item in text.split(","):
        value = positive_int(item)
        if value not in counts:
            counts.append(value)
    return tuple(counts)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("scale", help=HELP, description=HELP + ". Each process count "
                                   "runs through torchrun; every rank trains on its own data.")
    parser.add_argument("workload", metavar="WORKLOAD", help="a workload name (see 'accelbench list')")
    parser.add_argument("--nproc", type=process_counts, default=(1, 2), metavar="N[,N...]",
                        help="processes per node to try, e.g. 1,2,4 (default 1,2)")
    groups.add_device_argument(parser, "auto", "default auto",
                               help="cpu (gloo), cuda (nccl), xpu (xccl) or auto, without an index: "
                               "local rank N uses device N (pick GPUs with CUDA_VISIBLE_DEVICES)")
    parser.add_argument("--backend", default="",
                        help="torch.distributed backend (default: the device's)")
    groups.add_stop_arguments(parser, epochs=False, target_ci=False, sustained=False, sizes=False,
                              time_help="measure about this long per world size; the no-sync "
                              "comparison runs as many steps again")
    groups.add_config_arguments(parser, compute=False, batch_size_help="batch per process",
                                threads_help="torch threads per process (default: the CPU's "
                                "cores / processes)")
    groups.add_cudnn_benchmark_argument(parser)
    parser.add_argument("--fsdp", action="store_true",
                        help="shard with FSDP2 (fully_shard) instead of DistributedDataParallel")
    groups.add_workload_file_argument(parser, "load your own workloads (registered with "
                                      "@accelbench.register)")
    nodes = parser.add_argument_group("several machines (passed to torchrun unchanged)")
    nodes.add_argument("--nnodes", type=positive_int, default=1)
    nodes.add_argument("--node-rank", type=non_negative_int)
    nodes.add_argument("--rdzv-endpoint", default="", metavar="HOST:PORT")
    nodes.add_argument("--rdzv-backend", default="c10d")
    nodes.add_argument("--rdzv-id", default="accelbench", metavar="ID")
    parser.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S,
                        metavar="SECONDS", help=f"kill a world size's processes after this long "
                        f"(default {DEFAULT_TIMEOUT_S:g})")
    add_json_argument(parser)
    add_saving_arguments(parser)
    parser.set_defaults(execute=execute)


def options_from_args(args: argparse.Namespace) -> ScaleOptions:
    return ScaleOptions.of(
        args.workload, args.nproc, device=args.device, timeout=args.timeout, fsdp=args.fsdp,
        backend=args.backend,
        rendezvous=Rendezvous(args.nnodes, args.node_rank, args.rdzv_endpoint, args.rdzv_backend,
                              args.rdzv_id),
        echo=args.debug, stop=stop_rule(args.steps, args.time_budget), warmup_steps=args.warmup,
        batch_size=args.batch_size, size=args.size, threads=args.threads,
        workload_files=tuple(str(Path(p).resolve()) for p in args.workload_file),
        cudnn_benchmark=args.cudnn_benchmark,
    )


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from accelbench.render.scale_table import scale_table
    from accelbench.scale.work import run_scale

    options = options_from_args(args)
    if args.output:
        check_writable(args.output)

    def drive(on_case: Callable[[RunRecord], None]) -> RunRecord:
        # --debug streams torchrun's output to the terminal: a live display would fight it.
        return run_scale(options, ["accelbench", *argv], on_case=on_case,
                         live=not (args.debug or args.quiet))

    def show(record: RunRecord, saved: Path) -> None:
        show_record(record, saved, args.output, args.json, lambda shown: [scale_table(shown)])

    return run_driven(drive, args.output, args.db, show)
