"""The options that several commands share, each declared once.

Every flag's destination is its Python keyword (``--target-ci`` -> ``target_ci``), so
``run_keywords`` hands the parsed values to ``options.values.build_run_options``, the function that
``accelbench.run()`` calls with the same keywords. The flags parse only the syntax (is it a whole
number?); what values are allowed is checked there, so the CLI and the Python API report a bad
value in the same words. Help texts differ between commands only where the meaning does.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from accelbench.devices import DEVICE_HELP
from accelbench.devices.precisions import PRECISION_NAMES
from accelbench.measure.loop.stop import (
    DEFAULT_SUSTAINED_INTERVAL_S,
    DEFAULT_TARGET_CI_PCT,
    DEFAULT_TIME_BUDGET_S,
)
from accelbench.options import DATA_MODES, DEFAULT_REPEATS, DEFAULT_WARMUP_STEPS, ISOLATIONS
from accelbench.options.values import DEFAULTS, RunKeywords, keyword_names
from accelbench.workloads.presets import DEFAULT_NEW_TOKENS, DEFAULT_PROMPT_LEN, SIZES
from accelbench.workloads.protocols import PROTOCOL_NAMES

_KEYWORDS = keyword_names(RunKeywords)


def whole_number(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def number(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _one_of(values: tuple[str, ...]) -> str:
    """The ``{a,b}`` that argparse shows for choices; the choice itself is checked by RunOptions."""
    return "{" + ",".join(values) + "}"


def run_keywords(args: argparse.Namespace, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """The parsed values of the shared options, as ``build_run_options`` keywords."""
    return {name: getattr(args, name) for name in _KEYWORDS
            if hasattr(args, name) and name not in exclude}


# --- what runs -----------------------------------------------------------------------------------
def add_workload_arguments(parser: argparse.ArgumentParser, names_help: str, *, nargs: str = "*",
                           suite: bool = False) -> None:
    """Workload names or wildcards, [--suite], --workload-file."""
    parser.add_argument("workloads", nargs=nargs, metavar="WORKLOAD", help=names_help)
    if suite:
        parser.add_argument("--suite", default=DEFAULTS["suite"],
                            help="run a named suite: quick or full")
    add_workload_file_argument(parser, "load your own workloads (registered with "
                               "@accelbench.register)" + ("" if nargs == "+" else
                                                          "; without names, runs every workload "
                                                          "it defines"))


def add_workload_file_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--workload-file", type=Path, action="append", default=[],
                        metavar="FILE.py", help=help)


def add_device_argument(parser: argparse.ArgumentParser, default: str | None, default_help: str,
                        help: str = DEVICE_HELP) -> None:
    parser.add_argument("--device", default=default, help=f"{help} ({default_help})")


def add_mode_argument(parser: argparse.ArgumentParser, default: tuple[str, ...],
                      generate: bool = False) -> None:
    spelled = {("train", "eval"): "train, eval or train,eval (default)",
               ("train",): "train (default), eval or train,eval"}
    words = spelled.get(default, "train, eval or train,eval")
    if generate:
        words += "; generate: greedy decoding with a KV cache (decoders)"
    parser.add_argument("--mode", dest="modes", metavar="MODE", default=default, help=words)


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """--prompt-len, --new-tokens: the generation cases (each pair is a case). Their defaults fit
    the model's context (RunOptions.generation_lengths); given without a generation case, they
    are refused (options.values.refuse_idle_lengths)."""
    parser.add_argument("--prompt-len", metavar="N[,N...]", default=DEFAULTS["prompt_len"],
                        help=f"--mode generate: prompt tokens per sequence (default "
                        f"{DEFAULT_PROMPT_LEN}, or the model's context minus the new tokens "
                        "where shorter); a list makes a case each")
    parser.add_argument("--new-tokens", metavar="N[,N...]", default=DEFAULTS["new_tokens"],
                        help=f"--mode generate: tokens generated per sequence, exactly (default "
                        f"{DEFAULT_NEW_TOKENS}, or half the model's context where less; "
                        "end-of-sequence ignored); a list makes a case each")
    add_protocol_argument(parser)


def add_protocol_argument(parser: argparse.ArgumentParser) -> None:
    """--protocol: a generation case shaped, repeated and reported as a peer defines it."""
    parser.add_argument("--protocol", metavar=_one_of(PROTOCOL_NAMES), default=DEFAULTS["protocol"],
                        help="--mode generate: run the field's protocol instead of accelbench's "
                        "lengths: llama-bench (pp512, tg128), gpt-fast (batch 1, 200 new tokens, "
                        "bandwidth achieved), mlperf-client (5 categories, TTFT and 2nd+ token "
                        "rate); a model whose context is shorter runs it scaled down, labelled")


def add_stream_argument(parser: argparse.ArgumentParser) -> None:
    """--stream: for run and sweep, which time generation cases."""
    parser.add_argument("--stream", action="store_true", default=DEFAULTS["stream"],
                        help="--mode generate: read each token to the host as it is made "
                        "(token.tolist() per step, as a streaming server does; the host clock "
                        "times each token). Without it, on CUDA and XPU the inter-token latency "
                        "is the device's cadence, no token read until the round ends")


# --- when to stop --------------------------------------------------------------------------------
def add_stop_arguments(parser: argparse.ArgumentParser, *, epochs: bool = True,
                       target_ci: bool = True, sustained: bool = True,
                       time_help: str = f"measure for about this long per case (default "
                       f"{DEFAULT_TIME_BUDGET_S:g})") -> None:
    """--steps | --time-budget | --epochs | --sustained (at most one: options.values.stop_rule
    says so), --sustained-interval, --target-ci, --warmup."""
    parser.add_argument("--steps", type=whole_number, help="measure exactly N steps after warm-up")
    parser.add_argument("--time-budget", type=number, metavar="SECONDS", help=time_help)
    if epochs:
        parser.add_argument("--epochs", type=whole_number,
                            help="measure N full epochs, as the published tables did")
    if target_ci:
        parser.add_argument("--target-ci", type=number, metavar="PCT",
                            help="with a time budget, stop as soon as the median step time's "
                            f"95%% CI is within +-PCT%% of the median (default "
                            f"{DEFAULT_TARGET_CI_PCT:g}; 0 measures the whole budget)")
    if sustained:
        parser.add_argument("--sustained", type=number, metavar="MINUTES",
                            help="after warm-up, run each case for MINUTES (fractions allowed) "
                            "and judge whether it holds its burst: burst (first fifth) against "
                            "sustained (last half) throughput, with the clock, temperature and "
                            "power over the same intervals; replaces --steps, --time-budget and "
                            "--target-ci, and the case timeout grows by as much")
        parser.add_argument("--sustained-interval", type=number, metavar="SECONDS",
                            help=f"with --sustained: record throughput and sensors per interval "
                            f"of SECONDS (default {DEFAULT_SUSTAINED_INTERVAL_S:g})")
    parser.add_argument("--warmup", type=whole_number, default=DEFAULTS["warmup"],
                        help=f"warm-up steps, excluded from the figures (default "
                        f"{DEFAULT_WARMUP_STEPS})")


# --- what is built and how it computes -----------------------------------------------------------
def add_config_arguments(parser: argparse.ArgumentParser, *, compute: bool = True,
                         batch_size: bool = True,
                         batch_size_help: str = "override every batch size",
                         threads_help: str = "CPU threads torch may use") -> None:
    """[--precision, --compile, --channels-last], --size, [--batch-size], --threads."""
    if compute:
        parser.add_argument("--precision", default=DEFAULTS["precision"],
                            help=f"{', '.join(PRECISION_NAMES)}, or a comma list (default fp32)")
        parser.add_argument("--compile", nargs="?", const="inductor", default=DEFAULTS["compile"],
                            metavar="BACKEND[:MODE]", help="torch.compile the model (default "
                            "back end: inductor; a comma list runs each; none = not compiled, so "
                            "inductor,none also says when compiling pays off); MODE is "
                            "torch.compile's: inductor:reduce-overhead captures CUDA graphs, "
                            "as gpt-fast's decode (--protocol gpt-fast applies it)")
        parser.add_argument("--channels-last", action="store_true",
                            help="channels-last memory format for models and 4-D inputs")
    parser.add_argument("--size", default=DEFAULTS["size"], metavar=_one_of(SIZES),
                        help="workload size: the published configuration or a tiny one")
    if batch_size:
        parser.add_argument("--batch-size", type=whole_number, help=batch_size_help)
    parser.add_argument("--threads", type=whole_number, help=threads_help)


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data, --data-dir, --workers."""
    parser.add_argument("--data", default=DEFAULTS["data"], metavar=_one_of(DATA_MODES),
                        help="synthetic: host batches copied every step (default); "
                        "synthetic-device: batches kept on the device (pure compute); "
                        "real: a data set from --data-dir")
    parser.add_argument("--data-dir", type=Path, help="folder with real data sets")
    parser.add_argument("--workers", type=whole_number, default=DEFAULTS["workers"],
                        help="data-loader worker processes for real data (default 0)")


def add_cudnn_benchmark_argument(parser: argparse.ArgumentParser) -> None:
    """--no-cudnn-benchmark (the keyword ``cudnn_benchmark=False``): for run, sweep and scale,
    which time their cases; check and probe judge numbers and always run with it off."""
    parser.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false",
                        default=DEFAULTS["cudnn_benchmark"],
                        help="do not let cuDNN try its convolution algorithms and keep the fastest "
                        "(torch.backends.cudnn.benchmark, on by default as in published CNN "
                        "figures; its tries happen in the warm-up)")


# --- how each case is run ------------------------------------------------------------------------
def add_isolation_arguments(parser: argparse.ArgumentParser, *, auto_batch: bool = True,
                            schedule: bool = True,
                            isolation_help: str = "run each case in its own worker process "
                            "(default: a crash costs only that case) or inline",
                            timeout_help: str = "stop a case that takes longer than this") -> None:
    """--isolation, --case-timeout, [--auto-batch], and with ``schedule`` --cooldown, --repeat."""
    parser.add_argument("--isolation", default=DEFAULTS["isolation"], metavar=_one_of(ISOLATIONS),
                        help=isolation_help)
    parser.add_argument("--case-timeout", type=number, default=DEFAULTS["case_timeout"],
                        metavar="SECONDS", help=f"{timeout_help} (default {DEFAULTS['case_timeout']:g})")
    if not schedule:
        return
    if auto_batch:
        parser.add_argument("--auto-batch", action="store_true",
                            help="on out-of-memory, halve the batch until it fits")
    parser.add_argument("--cooldown", type=number, default=DEFAULTS["cooldown"],
                        metavar="SECONDS", help="wait this long between cases (thermal recovery)")
    parser.add_argument("--repeat", type=whole_number, nargs="?", const=DEFAULT_REPEATS,
                        default=DEFAULTS["repeat"], metavar="N",
                        help="run each case in N fresh worker processes, interleaved (alone: "
                        f"{DEFAULT_REPEATS}); compare needs 4+ a side to call a difference")


# --- what a result is held against ---------------------------------------------------------------
def add_against_argument(parser: argparse.ArgumentParser) -> None:
    """``--against SOURCE``, shared by compare and run: one source per use, repeatable, so the
    names and runs typed after it stay names and runs (``run --against b.jsonl mnist``)."""
    parser.add_argument("--against", action="append", default=[], metavar="SOURCE",
                        help="place each result among shared results of the same work: a bundle "
                        "file, a folder of bundles or Parquet shards, a bands table, an http(s) "
                        "address or hf://datasets/ORG/NAME; one source per --against, repeat it "
                        "for more")


def looks_like_source(name: str) -> bool:
    """A name typed where a workload or run goes that is a shared-results source: a bundle, a
    folder of bundles, an address. Said so rather than "unknown workload" (each --against takes
    one)."""
    folder = Path(name)
    return (name.endswith(".jsonl") or "://" in name or name.startswith("accelbench:")
            or (folder.is_dir() and any(folder.glob("*.jsonl"))))
