"""Every option of ``accelbench run`` that is also a keyword of ``accelbench.run``, declared once:
its flag, keyword, default (per size where the sizes differ), type, parser, help and the docs'
words. Made from it: the flags of run, sweep, check and scale (``cli/optiongroups.py``), what a
keyword left out means (``options/values.DEFAULTS``), ``accelbench.run``'s keywords and the
parameter list of its docstring, and the option table of ``docs/run.md`` (both written by
``scripts/option_tables.py``; tests/options/test_options.py fails when either is stale). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.devices.precisions import PRECISION_NAMES
from accelbench.measure.loop.stop import (
    DEFAULT_SUSTAINED_INTERVAL_S,
    DEFAULT_TARGET_CI_PCT,
    DEFAULT_TIME_BUDGET_S,
)
from accelbench.options import (
    DATA_MODES,
    DEFAULT_CASE_TIMEOUT_S,
    DEFAULT_REPEATS,
    DEFAULT_WARMUP_STEPS,
    RUN_ISOLATIONS,
    TINY_TARGET_CI_PCT,
    TINY_TIME_BUDGET_S,
)
from accelbench.workloads.presets import DEFAULT_NEW_TOKENS, DEFAULT_PROMPT_LEN, SIZES
from accelbench.workloads.protocols import PROTOCOL_NAMES

#: How a flag's text becomes a value: argparse parses only the syntax (cli/optiongroups.py); the
#: allowed values are checked when RunOptions is built, for the CLI and the API in the same words.
PARSERS = ("text", "whole", "number", "switch", "off-switch", "path", "paths")


@dataclass(frozen=True)
class Option:
    #: The Python keyword and argparse's destination (``--time-budget`` -> ``time_budget``).
    keyword: str
    #: The CLI's help: one sentence, without the default (``default`` words are added).
    help: str
    #: What the keyword left out is (``accelbench.run``'s default, the flag's default).
    default: Any = None
    #: The keyword's type in ``accelbench.run``, as source text.
    annotation: str = "str | None"
    parse: str = "text"
    metavar: str | None = None
    #: The allowed names, shown as ``{a,b}`` (checked by RunOptions, with a "did you mean").
    choices: tuple[str, ...] = ()
    #: The flag given bare (``--repeat`` alone, ``--compile`` alone).
    const: Any = None
    #: The default in words; with ``tiny`` where ``--size tiny`` has its own.
    shown: str = ""
    tiny: str = ""
    #: The docs table's words where they say more than the help.
    doc: str = ""
    #: The flag where it is not the keyword spelled with dashes (``--no-cudnn-benchmark``).
    spelled: str = ""

    def __post_init__(self) -> None:
        if self.parse not in PARSERS:
            raise ValueError(f"{self.keyword}: parse {self.parse!r} is not one of {PARSERS}")

    @property
    def flag(self) -> str:
        return self.spelled or "--" + self.keyword.replace("_", "-")

    def default_words(self, sizes: bool = True) -> str:
        """" (default 10 s; 0.5 s at --size tiny)": the default of each size where they differ
        (``sizes``: the command has a --size whose tiny default differs)."""
        if not self.shown:
            return ""
        tiny = f"; {self.tiny} at --size tiny" if self.tiny and sizes else ""
        return f" (default {self.shown}{tiny})"

    def help_text(self, help: str | None = None, sizes: bool = True) -> str:
        """The CLI's help (a command's own ``help`` where the meaning differs), with the default."""
        return (help or self.help) + self.default_words(sizes)

    def usage(self) -> str:
        """``--time-budget SECONDS``: the flag as the docs write it."""
        value = ("{" + ",".join(self.choices) + "}" if self.choices else self.metavar or
                 ("" if self.parse in ("switch", "off-switch") else "N" if self.parse == "whole"
                  else "VALUE"))
        if value and self.const is not None:
            value = f"[{value}]"
        return f"{self.flag} {value}".rstrip()


_PRECISIONS = ", ".join(PRECISION_NAMES)

#: In the order of the docs' table: what runs, how it is measured, what is built, how each case
#: is run.
RUN_OPTIONS: tuple[Option, ...] = (
    Option("suite", "run a named suite: quick or full", annotation="str | None",
           metavar="{quick,full}", doc="a named suite: `quick` (default where no workload is named) or "
           "`full` (every workload at its published size)"),
    Option("workload_file", "load your own workloads (registered with @accelbench.register); "
           "without names, runs every workload it defines", default=(), parse="paths",
           annotation="PathLike | Sequence[PathLike] | None", metavar="FILE.py",
           doc="load your own workloads (see *Your own model* below); repeatable, or a list in "
           "Python"),
    Option("steps", "measure exactly N steps after warm-up", parse="whole",
           annotation="int | None", metavar="N"),
    Option("time_budget", "measure for about this long per case", parse="number",
           annotation="float | None", metavar="SECONDS", shown=f"{DEFAULT_TIME_BUDGET_S:g} s",
           tiny=f"{TINY_TIME_BUDGET_S:g} s", doc="measure for at most about this long per case "
           "(at least 5 samples); stops earlier once precise enough (`--target-ci`); generation "
           "rounds obey it too (at least 5 rounds, the median TPOT's CI; a given budget wins "
           "over a `--protocol`'s own count: [generate](generate.md#rounds-that-settle))"),
    Option("epochs", "measure N full epochs, as the published tables did", parse="whole",
           annotation="int | None", metavar="N", doc="measure N full epochs (epoch time is "
           "then *measured*, as in the published tables)"),
    Option("target_ci", "with a time budget, stop as soon as the median step time's 95% CI is "
           "within +-PCT% of the median; 0 measures the whole budget", parse="number",
           annotation="float | None", metavar="PCT", shown=f"{DEFAULT_TARGET_CI_PCT:g}",
           tiny=f"{TINY_TARGET_CI_PCT:g}", doc="with a time budget, stop as soon as the median "
           "step time's 95% CI is within ±PCT% of the median (`0` measures the whole budget); "
           "not with `--steps`/`--epochs`"),
    Option("sustained", "after warm-up, run each case for MINUTES (fractions allowed) and judge "
           "whether it holds its burst: burst (first fifth) against sustained (last half) "
           "throughput, with the clock, temperature and power over the same intervals; replaces "
           "--steps, --time-budget and --target-ci, and the case timeout grows by as much",
           parse="number", annotation="float | None", metavar="MINUTES",
           doc="after warm-up, run each case for MINUTES (fractions allowed) and say whether it "
           "**holds its burst**: throughput and the device's sensors per interval, burst against "
           "sustained, *holds* / *throttles to X%* / *can't tell* with the sensor change behind "
           "it (see *Burst or sustained* below); replaces `--steps`, `--time-budget` and "
           "`--target-ci`; the case timeout grows by as much. Not with `--mode generate`"),
    Option("sustained_interval", "with --sustained: record throughput and sensors per interval "
           "of SECONDS", parse="number", annotation="float | None", metavar="SECONDS",
           shown=f"{DEFAULT_SUSTAINED_INTERVAL_S:g} s", doc="with `--sustained`: the interval "
           "in seconds (at least 10 intervals a run)"),
    Option("warmup", "warm-up steps, excluded from the figures", default=DEFAULT_WARMUP_STEPS,
           parse="whole", annotation="int", metavar="N", shown=f"{DEFAULT_WARMUP_STEPS}",
           doc="warm-up steps, excluded from the figures and reported separately"),
    Option("batch_size", "override every batch size (by default the published ones)",
           parse="whole", annotation="int | None", metavar="N"),
    Option("threads", "CPU threads torch may use", parse="whole", annotation="int | None",
           metavar="N", doc="CPU threads torch may use (recorded in every case)"),
    Option("data", "synthetic: host batches copied every step; synthetic-device: batches kept "
           "on the device (pure compute); real: a data set from --data-dir", default="synthetic",
           annotation="str", choices=DATA_MODES, shown="synthetic",
           doc="`synthetic`: host batches copied to the device every step, as a DataLoader "
           "gives them (pinned on CUDA/XPU); `synthetic-device`: the batches stay on the device, "
           "pure compute (as timm and TorchBench measure); `real`: data sets from `--data-dir`. "
           "Recorded as the case's `data`; results of different modes are not comparable"),
    Option("data_dir", "folder with real data sets", parse="path", annotation="PathLike | None",
           metavar="DIR"),
    Option("workers", "data-loader worker processes for real data", default=0, parse="whole",
           annotation="int", metavar="N", shown="0"),
    Option("size", "workload size: the published configuration or a tiny one that shows each "
           "case works", default="published", annotation="str", choices=SIZES,
           shown="published", doc="the published configuration or a tiny one that shows each "
           "case works: where no `--steps`, `--time-budget`, `--epochs` or `--sustained` is given "
           f"it measures for {TINY_TIME_BUDGET_S:g} s, stopping once within "
           f"±{TINY_TARGET_CI_PCT:g}% (a given `--target-ci` stands), and where `--isolation` is "
           "not given its consecutive cases share one warm worker process per device (start-up "
           "paid once; each case begun fresh: numeric switches, default dtype, threads, "
           "environment put back, generators reseeded, memory released; later cases marked warm "
           "in `start`, `isolation` says `warm worker, pid N`; a worker that dies costs only its "
           "case, the next starts a fresh one). `run mnist vae nanogpt-char --size tiny --device "
           "cpu` (six cases) took 35 s here against 117 s before, with this 2-core VM busy (load "
           "3.6-4.9), and 22 s at a load of 3.6 ([`docs/performance.md`](performance.md) (h))"),
    Option("precision", f"{_PRECISIONS}, or a comma list", default=("fp32",),
           annotation="str | Sequence[str]", metavar="LIST", shown="fp32",
           doc="`fp32`, `tf32`, `bf16`, `fp16`, `amp-bf16`, `amp-fp16` (autocast with a "
           "gradient scaler); with `--mode generate` also `int8-wo`, `int4-wo` (weight-only "
           "quantized decode through PyTorch's kernels, see *Protocols, quantized decode* in "
           "[generate](generate.md)) and `int8-wo-torchao`, `int4-wo-torchao` (through torchao, "
           "where installed); a list (or a comma list) runs each"),
    Option("protocol", "--mode generate: run the field's protocol instead of accelbench's "
           "lengths: llama-bench (pp512, tg128), gpt-fast (batch 1, 200 new tokens, bandwidth "
           "achieved), mlperf-client (5 categories, TTFT and 2nd+ token rate); a model whose "
           "context is shorter runs it scaled down, labelled", annotation="str | None",
           choices=PROTOCOL_NAMES, doc="`--mode generate`: the peer's shapes, repetitions and "
           "figures instead of accelbench's lengths (a key field; see *Protocols, quantized "
           "decode* in [generate](generate.md))"),
    Option("prompt_len", "--mode generate: prompt tokens per sequence; a list makes a case each",
           annotation="int | str | Sequence[int] | None", metavar="N[,N...]",
           shown=f"{DEFAULT_PROMPT_LEN}, or the model's context minus the new tokens where "
           "shorter", doc="`--mode generate`: prompt tokens per sequence; a list (`128,512`) "
           "makes a case each (see [generate](generate.md))"),
    Option("new_tokens", "--mode generate: tokens generated per sequence, exactly "
           "(end-of-sequence ignored); a list makes a case each",
           annotation="int | str | Sequence[int] | None", metavar="N[,N...]",
           shown=f"{DEFAULT_NEW_TOKENS}, or half the model's context where less",
           doc="`--mode generate`: tokens generated per sequence, exactly (end-of-sequence "
           "ignored); a list makes a case each"),
    Option("stream", "--mode generate: read each token to the host as it is made "
           "(token.tolist() per step, as a streaming server does; the host clock times each "
           "token). Without it, on CUDA and XPU the inter-token latency is the device's cadence, "
           "no token read until the round ends", default=False, parse="switch", annotation="bool",
           doc="`--mode generate`: read each token to the host as it is made (`token.tolist()` "
           "per step, as a streaming server does) and time each by the host clock; without it "
           "the inter-token latency on CUDA and XPU is the device's cadence. Recorded as "
           "`generation.streamed`"),
    Option("compile", "torch.compile the model (default back end: inductor; a comma list runs "
           "each; none = not compiled, so inductor,none also says when compiling pays off); MODE "
           "is torch.compile's: inductor:reduce-overhead captures CUDA graphs, as gpt-fast's "
           "decode (--protocol gpt-fast applies it)", annotation="bool | str | Sequence[str] | None",
           metavar="BACKEND[:MODE]", const="inductor",
           doc="`torch.compile` the model (bare: back end `inductor`, in Python `True`; a comma "
           "list runs each; `none` is the case not compiled, so `--compile inductor,none` runs "
           "both and says when compiling pays off); MODE is torch.compile's: "
           "`inductor:reduce-overhead` captures CUDA graphs, as gpt-fast's decode "
           "(`--protocol gpt-fast` applies it)"),
    Option("channels_last", "channels-last memory format for models and 4-D inputs",
           default=False, parse="switch", annotation="bool"),
    Option("cudnn_benchmark", "do not let cuDNN try its convolution algorithms and keep the "
           "fastest (torch.backends.cudnn.benchmark, on by default as in published CNN figures; "
           "its tries happen in the warm-up)", default=True, parse="off-switch",
           annotation="bool", spelled="--no-cudnn-benchmark",
           doc="turn off `torch.backends.cudnn.benchmark` (Python: `cudnn_benchmark=False`), "
           "which is **on by default** in `run`, `sweep` and `scale`: cuDNN then tries its "
           "convolution algorithms for each new input shape and keeps the fastest, as every "
           "published CNN figure we compare with was measured (NVIDIA's DeepLearningExamples, "
           "Lambda's NGC runs, timm's `benchmark.py`); without it CUDA CNN img/s read below them "
           "for a reason that is not the device. The tries happen in the first steps, i.e. in "
           "the warm-up (with `--warmup 0` the first measured step pays them), and so do their "
           "workspaces: they are in `setup_peak_memory_bytes`, not in the steady state's "
           "`peak_memory_bytes`. It changes the speed, not the work: it is recorded in each "
           "case's `backend_flags`, is not part of the comparability key, and `compare` shows it "
           "when two sides differ. `check` and `probe` always run with it off"),
    Option("isolation", "run each case in its own worker process (a crash costs only that case), "
           "inline, or as --nproc ranks under torchrun", annotation="str | None",
           choices=RUN_ISOLATIONS, shown="process",
           tiny="a warm worker shared by consecutive cases",
           doc="each case in its own worker process, or inline; the worker reads what a plain "
           "hand-written loop reads: with the thread count held equal (1 thread, where this VM's "
           "fresh processes agree within a few percent), 1.002 of its samples/s on MNIST (95% "
           "interval 0.974–1.031, 12 interleaved rounds) and 0.998 on ResNet-50 (0.970–1.027, 30 "
           "rounds): both within 3% by an equivalence test (90% intervals 0.979–1.026 and "
           "0.974–1.022); at torch's default 2 threads, 13 rotated ResNet-50 rounds read 1.064 "
           "(90% interval 1.016–1.113): never below the plain loop, though this VM's ±14% "
           "between fresh processes at 2 threads cannot show 3% (a session of its own, hence its "
           "own scheduler autogroup, was measured and ruled out as a cause of an under-read; "
           "[`docs/performance.md`](performance.md) (d))"),
    Option("nproc", "with --isolation torchrun: run each case as N ranks on this node (DDP, "
           "one device each; the CPU's ranks share its cores)", default=1, parse="whole",
           annotation="int", metavar="N", shown="1",
           doc="with `--isolation torchrun`: each case runs as N ranks on this node under "
           "torchrun, as `scale` runs a world size (DDP, batches seeded per rank, the slowest "
           "rank's step each step; see [`docs/scale.md`](scale.md)); the case's `scale` section "
           "holds the world and every rank"),
    Option("case_timeout", "stop a case that takes longer than this",
           default=DEFAULT_CASE_TIMEOUT_S, parse="number", annotation="float", metavar="SECONDS",
           shown=f"{DEFAULT_CASE_TIMEOUT_S:g} s", doc="stop a case after this many seconds: "
           "status `timeout`"),
    Option("auto_batch", "on out-of-memory, halve the batch until it fits", default=False,
           parse="switch", annotation="bool", doc="on out-of-memory, halve the batch until it "
           "fits; the batch used is recorded"),
    Option("cooldown", "wait this long between cases, for thermal recovery", default=0.0,
           parse="number", annotation="float", metavar="SECONDS", shown="0 s"),
    Option("repeat", f"run each case in N fresh worker processes, interleaved (alone: "
           f"{DEFAULT_REPEATS}); compare needs 4+ a side to call a difference", default=1,
           parse="whole", annotation="int", metavar="N", const=DEFAULT_REPEATS, shown="1",
           doc=f"run each case in N fresh worker processes (`--repeat` alone: {DEFAULT_REPEATS}), "
           "interleaved: round r runs every case once, so slow drift spreads over all; every "
           "process's samples are kept (`repeats` in the result), the top-level figures pool "
           "them, and `compare` needs 4+ processes a side to call a difference"),
    Option("profile", "profile a few extra steps (torch.profiler) and diagnose each case: "
           "launch-, compute-, memory-, input- or kernel-bound", default=False, parse="switch",
           annotation="bool", doc="after the measured steps, profile 5 more with "
           "`torch.profiler` and diagnose the case (see *Why it runs at that speed*)"),
)

OPTIONS: dict[str, Option] = {option.keyword: option for option in RUN_OPTIONS}
#: What each keyword left out means, for the CLI's flags and the Python keywords alike.
DEFAULTS: dict[str, Any] = {option.keyword: option.default for option in RUN_OPTIONS}


def markdown_table() -> str:
    """The option table of docs/run.md: one row per option, with its default (per size where
    ``--size tiny`` has its own)."""
    rows = ["| option | Python | meaning |", "|---|---|---|"]
    for option in RUN_OPTIONS:
        words = option.doc or option.help
        if option.shown:
            tiny = f" ({option.tiny} at `--size tiny`)" if option.tiny else ""
            words += f". Default: {option.shown}{tiny}"
        rows.append(f"| `{option.usage()}` | `{option.keyword}` | {words} |")
    return "\n".join(rows)


def docstring_lines(indent: str = "    ", width: int = 100) -> list[str]:
    """``accelbench.run``'s parameter list: each keyword with its flag, help and default."""
    import textwrap

    lines = []
    for option in RUN_OPTIONS:
        lines += textwrap.wrap(f"{option.keyword}: ``{option.flag}``: {option.help_text()}.",
                               width, initial_indent=indent, subsequent_indent=indent + "    ",
                               break_on_hyphens=False)
    return lines


def _source(value: Any) -> str:
    """A default as the source writes it (double quotes, as ruff's style has them)."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_source, value)) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def signature_lines(indent: str = "    ") -> list[str]:
    """``accelbench.run``'s keyword parameters, as source."""
    return [f"{indent}{option.keyword}: {option.annotation} = {_source(option.default)},"
            for option in RUN_OPTIONS]
