"""The Python API: measure a model object, or run workloads, from a notebook or script.

    import accelbench
    result = accelbench.bench(model, (inputs, labels), device="all", steps=20)
    result            # a table in a notebook
    record = accelbench.run(["mnist"], device="cpu", steps=20)
    for case in record.cases:
        print(case.workload, case.mode, case.throughput(), case.epoch_time())
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from accelbench.devices import DeviceSet
from accelbench.errors import UsageError
from accelbench.options import DEFAULT_TIME_BUDGET_S, DEFAULT_WARMUP_STEPS, RunOptions, StopRule
from accelbench.results import RunRecord
from accelbench.runner import CaseProgress, plan, run_plan
from accelbench.workloads import match_workloads


class Result(RunRecord):
    """The RunRecord a run returns, shown as a table in a notebook."""

    @classmethod
    def of(cls, record: RunRecord) -> Result:
        return cls(**{f.name: getattr(record, f.name) for f in fields(record)})

    def _repr_html_(self) -> str:
        from accelbench.render.notebook import record_html

        return record_html(self)


def list_workloads(*patterns: str) -> list[str]:
    """Registered workload names, optionally filtered by wildcards such as ``resnet*``."""
    return match_workloads(patterns or ("*",))


def stop_rule(steps: int | None = None, time_budget: float | None = None,
              epochs: int | None = None) -> StopRule:
    given = [(k, v) for k, v in (("steps", steps), ("time", time_budget), ("epochs", epochs))
             if v is not None]
    if len(given) > 1:
        raise UsageError("give at most one of steps, time_budget and epochs")
    return StopRule(*given[0]) if given else StopRule("time", DEFAULT_TIME_BUDGET_S)


def _tuple(value: str | Sequence[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def run_options(workloads: Sequence[str], device: str, modes: str | Sequence[str], *,
                steps: int | None = None, time_budget: float | None = None,
                epochs: int | None = None, precision: str | Sequence[str] = "fp32",
                compile: str | Sequence[str] | None = None, **settings: Any) -> RunOptions:
    """RunOptions from keyword arguments as the CLI spells them (``compile="inductor"``)."""
    return RunOptions(workloads=tuple(workloads), device=device, modes=_tuple(modes),
                      stop=stop_rule(steps, time_budget, epochs), precisions=_tuple(precision),
                      compile_backends=_tuple(compile) if compile else ("",), **settings)


def execute(options: RunOptions, save: bool = True, progress: CaseProgress | None = None,
            prepare: Callable[[RunRecord], None] | None = None,
            batch_sizes: Sequence[int] | None = None) -> Result:
    """Plan and run ``options`` on this machine's devices (at each of ``batch_sizes``: a sweep);
    save the record like a CLI run."""
    devices = DeviceSet.current()
    command = ["python", *sys.argv[:1]]
    if batch_sizes is not None:
        from accelbench.sweep_run import run_sweep

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
    workloads: Sequence[str] = ("mnist",),
    device: str = "auto",
    modes: Sequence[str] = ("train", "eval"),
    *,
    steps: int | None = None,
    time_budget: float | None = None,
    epochs: int | None = None,
    warmup: int = DEFAULT_WARMUP_STEPS,
    batch_size: int | None = None,
    threads: int | None = None,
    data: str = "synthetic",
    data_dir: str | Path | None = None,
    size: str = "published",
    workers: int = 0,
    workload_file: str | Path | None = None,
    isolation: str = "process",
    precision: str | Sequence[str] = "fp32",
    compile: str | Sequence[str] | None = None,
    repeat: int = 1,
    save: bool = True,
    progress: CaseProgress | None = None,
) -> Result:
    """Run workloads (names, wildcards, or ``timm:``/``torchvision:``/``hf:`` model names) on
    devices and return the RunRecord (also saved like a CLI run)."""
    workload_files: tuple[str, ...] = ()
    if workload_file is not None:
        from accelbench.userfile import load_workload_file

        load_workload_file(Path(workload_file))
        workload_files = (str(Path(workload_file).resolve()),)
    options = run_options(
        match_workloads(list(workloads)), device, modes, steps=steps, time_budget=time_budget,
        epochs=epochs, precision=precision, compile=compile, warmup_steps=warmup,
        batch_size=batch_size, threads=threads, data=data,
        data_dir=Path(data_dir) if data_dir else None, size=size, workers=workers,
        workload_files=workload_files, isolation=isolation, repeat=repeat,
    )
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
    steps: int | None = None,
    time_budget: float | None = None,
    epochs: int | None = None,
    warmup: int = DEFAULT_WARMUP_STEPS,
    batch_size: int | Sequence[int] | None = None,
    samples_per_epoch: int | None = None,
    precision: str | Sequence[str] = "fp32",
    compile: str | Sequence[str] | None = None,
    channels_last: bool = False,
    threads: int | None = None,
    isolation: str = "process",
    repeat: int = 1,
    auto_batch: bool = False,
    case_timeout: float = 1800.0,
    save: bool = True,
    progress: CaseProgress | None = None,
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
    processes (as ``accelbench run --repeat``), so it needs a model that can go to one.
    """
    from accelbench.models import objects
    from accelbench.workloads.base import register

    if not hasattr(model, "parameters") or not callable(model):
        raise UsageError(f"bench() needs a torch.nn.Module; got {type(model).__name__}")
    batch = objects.as_batch(example_batch)
    if samples_per_epoch is not None and samples_per_epoch <= 0:
        raise UsageError(f"samples_per_epoch must be positive, got {samples_per_epoch}")
    spec = objects.BenchSpec(model, batch, loss_fn, objects.optimizer_factory(optimizer),
                             samples_per_epoch or objects.DEFAULT_EPOCH_BATCHES * len(batch[0]))
    label = name or type(model).__name__
    cls = register(objects.object_class(label, spec))
    inline_reason = objects.why_not_picklable(spec) if isolation == "process" else "isolation='none'"
    if inline_reason and repeat > 1:
        raise UsageError(f"repeat={repeat} needs a worker process per repeat, but this model runs "
                         f"inline: {inline_reason}")
    options = run_options(
        [cls.name], device, modes, steps=steps, time_budget=time_budget, epochs=epochs,
        precision=precision, compile=compile, warmup_steps=warmup,
        batch_size=batch_size if isinstance(batch_size, int) else None, channels_last=channels_last,
        threads=threads, auto_batch=auto_batch, repeat=repeat,
        case_timeout=case_timeout, isolation="none" if inline_reason else "process",
    )
    how = f"inline: {inline_reason}" if inline_reason else "process"

    def mark(record: RunRecord) -> None:
        record.options["bench_isolation"] = how
        for case in record.cases:
            case.isolation = how

    sharing = contextlib.nullcontext() if inline_reason else objects.shared_with_workers(label, spec)
    with sharing:
        return execute(options, save, progress, prepare=mark, batch_sizes=_sweep_sizes(batch_size))


def _sweep_sizes(batch_size: int | Sequence[int] | str | None) -> tuple[int, ...] | None:
    if batch_size is None or isinstance(batch_size, int):
        return None
    from accelbench.sweep_analysis import parse_batch_sizes

    return parse_batch_sizes(batch_size)


def sweep(
    workloads: str | Sequence[str],
    batch_sizes: str | Sequence[int],
    device: str = "all",
    modes: str | Sequence[str] = "train",
    *,
    steps: int | None = None,
    time_budget: float | None = None,
    warmup: int = DEFAULT_WARMUP_STEPS,
    size: str = "published",
    precision: str | Sequence[str] = "fp32",
    compile: str | Sequence[str] | None = None,
    threads: int | None = None,
    isolation: str = "process",
    save: bool = True,
    progress: CaseProgress | None = None,
) -> Result:
    """``accelbench sweep`` from Python: every workload at each batch size (``[1, 4, 16]`` or
    ``"1,2,4,...,256"``) on each device; a record of kind "sweep" (see ``accelbench.sweep_analysis``
    for the saturation and crossover)."""
    options = run_options(
        match_workloads(_tuple(workloads)), device, modes, steps=steps, time_budget=time_budget,
        precision=precision, compile=compile, warmup_steps=warmup, size=size, threads=threads,
        isolation=isolation,
    )
    sizes = _sweep_sizes(batch_sizes)
    if sizes is None:
        raise UsageError("sweep needs a list of batch sizes, e.g. [1, 4, 16] or '1,2,4,...,256'")
    return execute(options, save, progress, batch_sizes=sizes)
