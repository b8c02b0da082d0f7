"""The options that several commands share, as flags: each made from its one declaration
(``options/declared.py``: flag, keyword, default, parser, help).

Every flag's destination is its Python keyword (``--target-ci`` -> ``target_ci``), so
``run_keywords`` hands the parsed values to ``options.values.build_run_options``, the function that
``accelbench.run()`` calls with the same keywords. The flags parse only the syntax (is it a whole
number?); what values are allowed is checked there, so the CLI and the Python API report a bad
value in the same words. Help texts differ between commands only where the meaning does (a
command's own ``help=``).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from accelbench.devices import DEVICE_HELP
from accelbench.options import ISOLATIONS, RUN_ISOLATIONS
from accelbench.options.declared import OPTIONS, RUN_OPTIONS

_KEYWORDS = tuple(option.keyword for option in RUN_OPTIONS)


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


_PARSE: dict[str, dict[str, Any]] = {
    "text": {}, "whole": {"type": whole_number}, "number": {"type": number},
    "switch": {"action": "store_true"}, "off-switch": {"action": "store_false"},
    "path": {"type": Path}, "paths": {"type": Path, "action": "append"},
}


def add_option(parser: argparse.ArgumentParser, keyword: str, help: str | None = None, *,
               sizes: bool = True, choices: tuple[str, ...] = ()) -> None:
    """The declared option ``keyword`` as a flag of ``parser``; ``help``: the command's own words
    where the meaning differs (the default is added either way, with the tiny size's where
    ``sizes``: the command's --size tiny has its own default); ``choices``: the command's own,
    where it takes fewer than the declaration's."""
    option = OPTIONS[keyword]
    if choices:
        option = replace(option, choices=choices)
    # argparse formats help with %: the declaration writes a plain "95% CI".
    settings: dict[str, Any] = {"dest": keyword, "help": option.help_text(help, sizes).replace("%", "%%"),
                                **_PARSE[option.parse],
                                "default": [] if option.parse == "paths" else option.default}
    if option.choices:  # shown as argparse shows choices; checked by RunOptions (did you mean)
        settings["metavar"] = "{" + ",".join(option.choices) + "}"
    elif option.metavar and option.parse not in ("switch", "off-switch"):
        settings["metavar"] = option.metavar
    if option.const is not None:
        settings.update(nargs="?", const=option.const)
    parser.add_argument(option.flag, **settings)


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
        add_option(parser, "suite")
    add_workload_file_argument(parser, None if nargs != "+" else
                               "load your own workloads (registered with @accelbench.register)")


def add_workload_file_argument(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    add_option(parser, "workload_file", help)


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
    add_option(parser, "prompt_len")
    add_option(parser, "new_tokens")
    add_protocol_argument(parser)


def add_protocol_argument(parser: argparse.ArgumentParser) -> None:
    """--protocol: a generation case shaped, repeated and reported as a peer defines it."""
    add_option(parser, "protocol")


def add_stream_argument(parser: argparse.ArgumentParser) -> None:
    """--stream: for run and sweep, which time generation cases."""
    add_option(parser, "stream")


# --- when to stop --------------------------------------------------------------------------------
def add_stop_arguments(parser: argparse.ArgumentParser, *, epochs: bool = True,
                       target_ci: bool = True, sustained: bool = True,
                       time_help: str | None = None, sizes: bool = True) -> None:
    """--steps | --time-budget | --epochs | --sustained (at most one: options.values.stop_rule
    says so), --sustained-interval, --target-ci, --warmup; ``sizes``: --size tiny has its own
    time budget and target CI (options.values.size_stop_rule)."""
    add_option(parser, "steps")
    add_option(parser, "time_budget", time_help, sizes=sizes)
    if epochs:
        add_option(parser, "epochs")
    if target_ci:
        add_option(parser, "target_ci", sizes=sizes)
    if sustained:
        add_option(parser, "sustained")
        add_option(parser, "sustained_interval")
    add_option(parser, "warmup")


# --- what is built and how it computes -----------------------------------------------------------
def add_config_arguments(parser: argparse.ArgumentParser, *, compute: bool = True,
                         batch_size: bool = True, batch_size_help: str | None = None,
                         threads_help: str | None = None) -> None:
    """[--precision, --compile, --channels-last], --size, [--batch-size], --threads."""
    if compute:
        for keyword in ("precision", "compile", "channels_last"):
            add_option(parser, keyword)
    add_option(parser, "size")
    if batch_size:
        add_option(parser, "batch_size", batch_size_help)
    add_option(parser, "threads", threads_help)


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data, --data-dir, --workers."""
    for keyword in ("data", "data_dir", "workers"):
        add_option(parser, keyword)


def add_cudnn_benchmark_argument(parser: argparse.ArgumentParser) -> None:
    """--no-cudnn-benchmark (the keyword ``cudnn_benchmark=False``): for run, sweep and scale,
    which time their cases; check and probe judge numbers and always run with it off."""
    add_option(parser, "cudnn_benchmark")


# --- how each case is run ------------------------------------------------------------------------
#: --isolation's words where the command has no --nproc (sweep).
_NO_WORLD_HELP = "run each case in its own worker process (a crash costs only that case) or inline"


def add_isolation_arguments(parser: argparse.ArgumentParser, *, auto_batch: bool = True,
                            schedule: bool = True, isolation_help: str | None = None,
                            timeout_help: str | None = None, sizes: bool = True,
                            world: bool = False) -> None:
    """--isolation, [--nproc], --case-timeout, [--auto-batch], and with ``schedule`` --cooldown,
    --repeat; ``sizes``: --size tiny shares a warm worker (options.values.resolve_isolation);
    ``world``: --isolation torchrun runs each case as --nproc ranks (run, check)."""
    add_option(parser, "isolation", isolation_help or (None if world else _NO_WORLD_HELP),
               sizes=sizes, choices=RUN_ISOLATIONS if world else ISOLATIONS)
    if world:
        add_option(parser, "nproc")
    add_option(parser, "case_timeout", timeout_help)
    if not schedule:
        return
    if auto_batch:
        add_option(parser, "auto_batch")
    add_option(parser, "cooldown")
    add_option(parser, "repeat")


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
