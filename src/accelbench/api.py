"""The Python API: measure a model object, or run workloads, from a notebook or script.

    import accelbench
    result = accelbench.bench(model, (inputs, labels), device="all", steps=20)
    result            # a table in a notebook
    record = accelbench.run(["mnist"], device="cpu", steps=20, target_ci=1, auto_batch=True)
    for case in record.cases:
        print(case.workload, case.mode, case.throughput(), case.epoch_time())

Every option of ``accelbench run`` is a keyword of the same name (``--target-ci`` ->
``target_ci=``), turned into RunOptions by the same function as the CLI's flags
(``options.values.build_run_options``), so both accept and reject the same values.
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from accelbench.devices import DeviceSet
from accelbench.engine.case import CaseProgress, plan
from accelbench.engine.runner import run_plan
from accelbench.errors import UsageError
from accelbench.options import RunOptions
from accelbench.options.declared import DEFAULTS
from accelbench.options.recorded import RecordedRun
from accelbench.options.values import (
    BenchKeywords,
    PathLike,
    SweepKeywords,
    build_run_options,
    check_data,
    load_workload_files,
    reject_unknown,
)
from accelbench.results import RunRecord
from accelbench.workloads import match_workloads

if TYPE_CHECKING:
    from typing_extensions import Unpack


class Result(RunRecord):
    """The RunRecord a run returns, shown as a table: in a notebook (HTML), and by ``print``
    (the tables ``accelbench run`` prints, at the terminal's width: ``COLUMNS``, else 100)."""

    @classmethod
    def of(cls, record: RunRecord) -> Result:
        return cls(**{f.name: getattr(record, f.name) for f in fields(record)})

    def _repr_html_(self) -> str:
        from accelbench.render.notebook import record_html

        return record_html(self)

    def __str__(self) -> str:
        from shutil import get_terminal_size

        from accelbench.render.notebook import record_text

        return record_text(self, get_terminal_size((100, 24)).columns)

    def __repr__(self) -> str:
        """Short: the run and its cases' statuses ("<accelbench run 1a2b3c: 2 cases, 2 ok>");
        ``print`` shows the tables, the fields are attributes."""
        statuses = Counter(case.status for case in self.cases)
        said = ", ".join(f"{count} {status}" for status, count in statuses.items())
        return (f"<accelbench {self.kind} {self.run_id}: {len(self.cases)} case"
                f"{'s' * (len(self.cases) != 1)}{', ' + said if said else ''}>")


def list_workloads(*patterns: str) -> list[str]:
    """Registered workload names, optionally filtered by wildcards such as ``resnet*``."""
    return match_workloads(patterns or ("*",))


def execute(options: RunOptions, save: bool = True, progress: CaseProgress | None = None,
            prepare: Callable[[RunRecord], None] | None = None,
            batch_sizes: Sequence[int] | None = None) -> Result:
    """Plan and run ``options`` on this machine's devices (at each of ``batch_sizes``: a sweep);
    save the record like a CLI run. The data is checked first, as the CLI does."""
    check_data(options)
    devices = DeviceSet.current()
    command = ["python", *sys.argv[:1]]
    if batch_sizes is not None:
        from accelbench.sweeps.run import run_sweep

        record = run_sweep(options, devices, batch_sizes, command, progress)
    else:
        record = run_plan(options, devices, plan(options, devices), command, progress=progress)
    if prepare is not None:
        prepare(record)
    if save:
        from accelbench.store.keep import store_everywhere

        store_everywhere(record)
    return Result.of(record)


def run(
    workloads: str | Sequence[str] | None = None,
    device: str | None = None,
    modes: str | Sequence[str] | None = None,
    *,
    options: RunOptions | None = None,
    save: bool = True,
    progress: CaseProgress | None = None,
    # BEGIN keywords: written by scripts/option_tables.py from options/declared.py
    suite: str | None = None,
    workload_file: PathLike | Sequence[PathLike] | None = (),
    steps: int | None = None,
    time_budget: float | None = None,
    epochs: int | None = None,
    target_ci: float | None = None,
    sustained: float | None = None,
    sustained_interval: float | None = None,
    warmup: int = 3,
    batch_size: int | None = None,
    threads: int | None = None,
    data: str = "synthetic",
    data_dir: PathLike | None = None,
    workers: int = 0,
    size: str = "published",
    precision: str | Sequence[str] = ("fp32",),
    protocol: str | None = None,
    prompt_len: int | str | Sequence[int] | None = None,
    new_tokens: int | str | Sequence[int] | None = None,
    stream: bool = False,
    compile: bool | str | Sequence[str] | None = None,
    channels_last: bool = False,
    cudnn_benchmark: bool = True,
    isolation: str | None = None,
    nproc: int = 1,
    case_timeout: float = 1800.0,
    auto_batch: bool = False,
    cooldown: float = 0.0,
    repeat: int = 1,
    profile: bool = False,
    # END keywords
) -> Result:
    """Run workloads (names, wildcards, or ``timm:``/``torchvision:``/``hf:`` model names) on
    devices and return the RunRecord (also saved like a CLI run).

    Defaults: ``mnist`` (or the ``suite=``, or the workloads ``workload_file=`` registers), on
    ``auto`` (``all`` for a suite), in ``train`` and ``eval``. Every ``accelbench run`` option is a
    keyword of the same name (``--target-ci`` -> ``target_ci``, ``--no-cudnn-benchmark`` ->
    ``cudnn_benchmark=False``). A list option takes a list or a comma string
    (``precision="fp32,bf16"``); ``compile=True`` is a bare ``--compile``. Or give
    ``options=RunOptions(...)`` and nothing else.

    Keyword Args:
        suite: ``--suite``: run a named suite: quick or full.
        workload_file: ``--workload-file``: load your own workloads (registered with
            @accelbench.register); without names, runs every workload it defines.
        steps: ``--steps``: measure exactly N steps after warm-up.
        time_budget: ``--time-budget``: measure for about this long per case (default 10 s; 0.5 s at
            --size tiny).
        epochs: ``--epochs``: measure N full epochs, as the published tables did.
        target_ci: ``--target-ci``: with a time budget, stop as soon as the median step time's 95%
            CI is within +-PCT% of the median; 0 measures the whole budget (default 2; 5 at --size
            tiny).
        sustained: ``--sustained``: after warm-up, run each case for MINUTES (fractions allowed) and
            judge whether it holds its burst: burst (first fifth) against sustained (last half)
            throughput, with the clock, temperature and power over the same intervals; replaces
            --steps, --time-budget and --target-ci, and the case timeout grows by as much.
        sustained_interval: ``--sustained-interval``: with --sustained: record throughput and
            sensors per interval of SECONDS (default 10 s).
        warmup: ``--warmup``: warm-up steps, excluded from the figures (default 3).
        batch_size: ``--batch-size``: override every batch size (by default the published ones).
        threads: ``--threads``: CPU threads torch may use.
        data: ``--data``: synthetic: host batches copied every step; synthetic-device: batches kept
            on the device (pure compute); real: a data set from --data-dir (default synthetic).
        data_dir: ``--data-dir``: folder with real data sets.
        workers: ``--workers``: data-loader worker processes for real data (default 0).
        size: ``--size``: workload size: the published configuration or a tiny one that shows each
            case works (default published).
        precision: ``--precision``: fp32, tf32, bf16, fp16, amp-bf16, amp-fp16, int8-wo, int4-wo,
            int8-wo-torchao, int4-wo-torchao, or a comma list (default fp32).
        protocol: ``--protocol``: --mode generate: run the field's protocol instead of accelbench's
            lengths: llama-bench (pp512, tg128), gpt-fast (batch 1, 200 new tokens, bandwidth
            achieved), mlperf-client (5 categories, TTFT and 2nd+ token rate); a model whose context
            is shorter runs it scaled down, labelled.
        prompt_len: ``--prompt-len``: --mode generate: prompt tokens per sequence; a list makes a
            case each (default 512, or the model's context minus the new tokens where shorter).
        new_tokens: ``--new-tokens``: --mode generate: tokens generated per sequence, exactly
            (end-of-sequence ignored); a list makes a case each (default 128, or half the model's
            context where less).
        stream: ``--stream``: --mode generate: read each token to the host as it is made
            (token.tolist() per step, as a streaming server does; the host clock times each token).
            Without it, on CUDA and XPU the inter-token latency is the device's cadence, no token
            read until the round ends.
        compile: ``--compile``: torch.compile the model (default back end: inductor; a comma list
            runs each; none = not compiled, so inductor,none also says when compiling pays off);
            MODE is torch.compile's: inductor:reduce-overhead captures CUDA graphs, as gpt-fast's
            decode (--protocol gpt-fast applies it).
        channels_last: ``--channels-last``: channels-last memory format for models and 4-D inputs.
        cudnn_benchmark: ``--no-cudnn-benchmark``: do not let cuDNN try its convolution algorithms
            and keep the fastest (torch.backends.cudnn.benchmark, on by default as in published CNN
            figures; its tries happen in the warm-up).
        isolation: ``--isolation``: run each case in its own worker process (a crash costs only that
            case), inline, or as --nproc ranks under torchrun (default process; a warm worker shared
            by consecutive cases at --size tiny).
        nproc: ``--nproc``: with --isolation torchrun: run each case as N ranks on this node (DDP,
            one device each; the CPU's ranks share its cores) (default 1).
        case_timeout: ``--case-timeout``: stop a case that takes longer than this (default 1800 s).
        auto_batch: ``--auto-batch``: on out-of-memory, halve the batch until it fits.
        cooldown: ``--cooldown``: wait this long between cases, for thermal recovery (default 0 s).
        repeat: ``--repeat``: run each case in N fresh worker processes, interleaved (alone: 10);
            compare needs 4+ a side to call a difference (default 1).
        profile: ``--profile``: profile a few extra steps (torch.profiler) and diagnose each case:
            launch-, compute-, memory-, input- or kernel-bound.
    """
    keywords: dict[str, Any] = {name: value for name, value in locals().items() if name in DEFAULTS}
    if options is not None:
        given = [name for name, value in (("workloads", workloads), ("device", device),
                                          ("modes", modes)) if value is not None]
        given += [name for name, value in keywords.items() if value != DEFAULTS[name]]
        if given:
            raise UsageError(f"give options=RunOptions(...) or keywords, not both (got {given[0]!r})")
        return execute(load_workload_files(options), save, progress)
    if workloads is None and not suite and not workload_file:
        workloads = ("mnist",)
    options = build_run_options(workloads, device, modes or ("train", "eval"), **keywords)
    return execute(options, save, progress)


def bench(
    model: Any,
    example_batch: Any,
    loss_fn: Callable[..., Any] | None = None,
    optimizer: Any = None,
    device: str = "all",
    modes: str | Sequence[str] = ("train", "eval"),
    *,
    name: str | None = None,
    batch_size: int | Sequence[int] | None = None,
    samples_per_epoch: int | None = None,
    save: bool = True,
    progress: CaseProgress | None = None,
    **keywords: Unpack[BenchKeywords],
) -> Result:
    """Measure a model object on devices: the same record as ``run`` (saved in the history).

    ``example_batch`` is ``inputs`` or ``(inputs..., target)``; its first dimension is the batch
    size (``batch_size`` draws batches of another size from its rows; a list of batch sizes runs a
    sweep, as ``accelbench sweep`` does, and returns a record of kind "sweep").
    ``loss_fn(output, target)``
    defaults to cross-entropy (integer target) or mean squared error (float target). ``optimizer``
    is a torch.optim class, instance or ``f(parameters)``; default SGD lr 0.01. Each case trains a
    fresh copy of the model. With ``isolation="process"`` each case runs in a worker process when
    the model, loss and optimiser can be pickled and imported there, otherwise inline; each case's
    ``isolation`` says which, and why. ``repeat=N`` measures each case in N worker
    processes (as ``accelbench run --repeat``), so it needs a model that can go to one. The other
    keywords are ``run``'s: ``steps``, ``time_budget``, ``epochs``, ``sustained``,
    ``sustained_interval``, ``target_ci``, ``warmup``,
    ``precision``, ``compile``, ``channels_last``, ``threads``, ``case_timeout``, ``auto_batch``,
    ``cooldown``, ``profile``, ``cudnn_benchmark`` (see ``options.values.BenchKeywords``).
    """
    from accelbench.workloads.base import register
    from accelbench.workloads.named import objects

    if not hasattr(model, "parameters") or not callable(model):
        raise UsageError(f"bench() needs a torch.nn.Module; got {type(model).__name__}")
    batch = objects.as_batch(example_batch)
    if samples_per_epoch is not None and samples_per_epoch <= 0:
        raise UsageError(f"samples_per_epoch must be positive, got {samples_per_epoch}")
    spec = objects.BenchSpec(model, batch, loss_fn, objects.optimizer_factory(optimizer),
                             samples_per_epoch or objects.DEFAULT_EPOCH_BATCHES * len(batch[0]))
    label = name or type(model).__name__
    reject_unknown("bench", keywords, BenchKeywords)
    cls = register(objects.object_class(label, spec))
    # Built (and validated) as the user asked before deciding where the cases can run.
    options = build_run_options([cls.name], device, modes, **keywords,
                                batch_size=batch_size if isinstance(batch_size, int) else None)
    inline_reason = (objects.why_not_picklable(spec) if options.isolation == "process"
                     else "isolation='none'")
    if inline_reason and options.repeat > 1:
        raise UsageError(f"repeat={options.repeat} needs a worker process per repeat, but this "
                         f"model runs inline: {inline_reason}")
    options = replace(options, isolation="none" if inline_reason else "process")
    how = f"inline: {inline_reason}" if inline_reason else "process"

    def mark(record: RunRecord) -> None:
        if isinstance(record.options, RecordedRun):
            record.options = replace(record.options, bench_isolation=how)
        for case in record.cases:
            case.isolation = how

    sharing = contextlib.nullcontext() if inline_reason else objects.shared_with_workers(label, spec)
    with sharing:
        return execute(options, save, progress, prepare=mark, batch_sizes=_sweep_sizes(batch_size))


def _sweep_sizes(batch_size: int | Sequence[int] | str | None) -> tuple[int, ...] | None:
    if batch_size is None or isinstance(batch_size, int):
        return None
    from accelbench.sweeps.analysis import parse_batch_sizes

    return parse_batch_sizes(batch_size)


def sweep(
    workloads: str | Sequence[str],
    batch_sizes: str | Sequence[int],
    device: str = "all",
    modes: str | Sequence[str] = "train",
    *,
    save: bool = True,
    progress: CaseProgress | None = None,
    **keywords: Unpack[SweepKeywords],
) -> Result:
    """``accelbench sweep`` from Python: every workload at each batch size (``[1, 4, 16]`` or
    ``"1,2,4,...,256"``) on each device; a record of kind "sweep" (see ``accelbench.sweeps.analysis``
    for the saturation and crossover). The keywords are ``accelbench sweep``'s options, as ``run``
    spells them (see ``options.values.SweepKeywords``)."""
    reject_unknown("sweep", keywords, SweepKeywords)
    sizes = _sweep_sizes(batch_sizes)
    if sizes is None:
        raise UsageError("sweep needs a list of batch sizes, e.g. [1, 4, 16] or '1,2,4,...,256'")
    return execute(build_run_options(workloads, device, modes, **keywords), save, progress,
                   batch_sizes=sizes)
