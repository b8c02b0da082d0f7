"""The case model every case-running subcommand shares: a :class:`Case` (workload x mode x
device x batch x precision x compile x layout), the :func:`plan` that makes them from the options,
the result that names a case before it runs and the status an exception becomes. What crosses
to another process about a case is its spec (``engine/spec.py``)."""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import torch

from accelbench import __version__
from accelbench.codec import FieldCodec
from accelbench.devices import Device, DeviceSet
from accelbench.devices.environment import collect_environment
from accelbench.errors import UsageError
from accelbench.measure.generation.settle import RoundRule
from accelbench.measure.loop.step_loop import NonFiniteError
from accelbench.measure.loop.stop import StopRule
from accelbench.options import RunOptions
from accelbench.options.recorded import RecordedRun
from accelbench.results import CaseResult, RunRecord
from accelbench.results.case_key import CaseKey, key_values
from accelbench.workloads.base import Workload, generates
from accelbench.workloads.catalogue import get_workload_class
from accelbench.workloads.presets import GENERATE
from accelbench.workloads.protocols import protocol
from accelbench.workloads.suites import suite_batch_size, suite_modes


def _device_named(name: Any, context: Mapping[str, Any]) -> Device:
    devices: DeviceSet | None = context.get("devices")
    return (devices or DeviceSet.current()).select(name)[0]


#: A case's device travels by name (in a worker's spec) and is found again, never pickled.
DEVICE_BY_NAME = FieldCodec(lambda device: device.name, _device_named)


@dataclass(unsafe_hash=True)
class Case(CaseKey):
    """One case to run: its key (``CaseKey``: workload, mode, batch, precision, compile, layout,
    data, size, generation lengths ...) and the device it runs on. Made by :func:`plan`, whose
    :func:`keyed` fills the key fields the options decide; its result copies every key field."""

    device: Device = field(kw_only=True, metadata={"codec": DEVICE_BY_NAME})

    @property
    def label(self) -> str:
        extras = [f"prompt {self.prompt_len}, {self.new_tokens} new"] if self.new_tokens else []
        extras += [self.precision] if self.precision != "fp32" else []
        extras += [f"compile={self.compile_backend}"] if self.compile_backend else []
        extras += ["channels-last"] if self.channels_last else []
        suffix = f", {', '.join(extras)}" if extras else ""
        return f"{self.workload} {self.mode} on {self.device.name} (batch {self.batch_size}{suffix})"


CaseProgress = Callable[[Case, str, float, float | None], None]


def plan(options: RunOptions, devices: DeviceSet) -> list[Case]:
    """Every workload x mode x device the options ask for, in a stable order."""
    chosen = devices.select(options.device)
    cases = []
    for name in options.workloads:
        cls = get_workload_class(name)
        workload = cls(options.size)
        for mode in suite_modes(options.suite, name, options.modes,
                                sustained=options.stop.kind == "sustained"):
            if mode == GENERATE:
                cases += _generation_cases(options, name, workload, generates(cls), chosen)
                continue
            if mode not in workload.modes:
                continue
            batch = options.batch_size or suite_batch_size(options.suite, name, mode,
                                                           workload.batch_size(mode))
            cases.extend(
                keyed(Case(workload=name, mode=mode, device=device, batch_size=batch,
                           precision=precision, compile_backend=backend,
                           channels_last=options.channels_last), options)
                for precision in options.precisions
                for backend in options.compile_backends
                for device in chosen
            )
    return cases


def _generation_cases(options: RunOptions, name: str, workload: Workload, decoder: bool,
                      chosen: list[Device]) -> list[Case]:
    """One case per prompt length x new tokens x precision x compile x device; batch 1 unless
    given. A named workload that cannot generate is a usage error; a suite's is skipped."""
    if not decoder:
        if options.suite is None:
            raise UsageError(f"--mode generate needs a decoder (a workload with prefill and "
                             f"decode_step); {name!r} is not one")
        return []
    return [keyed(Case(workload=name, mode=GENERATE, device=device, batch_size=options.batch_size or 1,
                       precision=precision, compile_backend=backend,
                       channels_last=options.channels_last, prompt_len=prompt, new_tokens=new),
                  options)
            for prompt, new in options.generation_lengths(name, workload.context_length())
            for precision in options.precisions
            for backend in options.compile_backends
            for device in chosen]


_UNSUPPORTED_WORDS = ("unsupported", "not supported", "not implemented", "no kernel")


def status_of(error: BaseException) -> str:
    if isinstance(error, NonFiniteError):
        return "nan"
    if isinstance(error, torch.OutOfMemoryError | MemoryError) or "out of memory" in str(error).lower():
        return "oom"
    if isinstance(error, NotImplementedError) or any(
            word in str(error).lower() for word in _UNSUPPORTED_WORDS):
        return "unsupported"
    return "failed"


def keyed(case: Case, options: RunOptions) -> Case:
    """``case`` with the key fields the options decide: the workload's version, the data and the
    size, and for a generation case whether it streams and under which --protocol."""
    generation = bool(case.new_tokens)
    return replace(case, workload_version=get_workload_class(case.workload).version,
                   data=options.data, size=options.size, streamed=generation and options.stream,
                   protocol=options.protocol if generation else "")


def skeleton_result(case: Case, options: RunOptions) -> CaseResult:
    """A result that names the case (every key field, as :func:`keyed` settles them for
    ``options``) and its settings, before anything is measured."""
    return CaseResult(
        **key_values(keyed(case, options)), device=case.device.name,
        stop_rule=generation_rounds(options)[2] if case.new_tokens else options.stop.describe(),
        threads=torch.get_num_threads(), memory_source=case.device.memory_source,
    )


#: Generation rounds measured where no time budget governs them (``--epochs``, which counts
#: a training set's passes, says nothing about rounds).
DEFAULT_GENERATION_ROUNDS = 3


def generation_rounds(options: RunOptions) -> tuple[int | StopRule, int, str]:
    """(measured rounds: a count, or the time budget that settles them; the least warm-up
    rounds; the rule in words) of a generation case (measure/generation/settle.py). ``--steps N``
    is exactly N rounds; a --protocol keeps its own count (llama-bench's 5 repetitions ...)
    unless the stop rule was given (``--time-budget``, ``--target-ci``); otherwise the time
    budget governs rounds as it governs steps (the tiny size's 0.5 s, else 10 s), at least 5
    rounds. One warm-up round at least, unless ``--warmup 0``."""
    warmup = 1 if options.warmup_steps else 0
    stop, own = options.stop, ""
    rounds: int | StopRule
    if stop.kind == "steps":
        rounds = int(stop.value)
    elif options.protocol and not (options.stop_given and stop.kind == "time"):
        rounds, own = protocol(options.protocol).rounds, f" ({options.protocol}'s own count)"
    elif stop.kind == "time":
        rounds = stop
    else:
        rounds = DEFAULT_GENERATION_ROUNDS
    rule = RoundRule(0, warmup, rounds) if isinstance(rounds, StopRule) else RoundRule(rounds, warmup)
    return rounds, warmup, rule.describe() + own


def record_error(result: CaseResult, error: Exception) -> CaseResult:
    """``result`` with ``error`` as its status, error text and traceback."""
    result.status = status_of(error)
    result.error = f"{type(error).__name__}: {error}".strip()
    if isinstance(error, NonFiniteError):
        result.nonfinite_step = error.step
    result.traceback = traceback.format_exc(limit=8)
    return result


def new_record(options: RunOptions, devices: DeviceSet, command: list[str]) -> RunRecord:
    return RunRecord(
        run_id=uuid.uuid4().hex[:12],
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        accelbench_version=__version__,
        command=command,
        options=RecordedRun(options),
        environment=collect_environment(devices),
    )


def prepare_worker(options: RunOptions) -> None:
    """A worker process sees the parent's user workloads and thread count."""
    from pathlib import Path

    from accelbench.workloads.catalogue import load_workload_file

    for path in options.workload_files:
        load_workload_file(Path(path))
    if options.threads:
        torch.set_num_threads(options.threads)
