"""The case model every case-running subcommand shares: a :class:`Case` (workload x mode x
device x batch x precision x compile x layout), the :func:`plan` that makes them from the options,
the result that names a case before it runs, the status an exception becomes, and the
:class:`WorkerSpec` a worker process is started with (to and from JSON here only)."""

from __future__ import annotations

import json
import traceback
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar

import torch

from accelbench import __version__
from accelbench.devices import Device, DeviceSet
from accelbench.devices.environment import collect_environment
from accelbench.errors import UsageError
from accelbench.measure.loop import NonFiniteError
from accelbench.options import RunOptions
from accelbench.results import CaseResult, RunRecord
from accelbench.workloads.base import Workload, generates
from accelbench.workloads.catalogue import get_workload_class
from accelbench.workloads.presets import GENERATE
from accelbench.workloads.protocols import protocol
from accelbench.workloads.suites import suite_batch_size, suite_modes


@dataclass(frozen=True)
class Case:
    workload: str
    mode: str
    device: Device
    batch_size: int
    precision: str = "fp32"
    compile_backend: str = ""
    channels_last: bool = False
    #: Generation cases: prompt tokens and new tokens per sequence (0 for train and eval).
    prompt_len: int = 0
    new_tokens: int = 0

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
                Case(name, mode, device, batch, precision, backend, options.channels_last)
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
    return [Case(name, GENERATE, device, options.batch_size or 1, precision, backend,
                 options.channels_last, prompt, new)
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


def skeleton_result(case: Case, options: RunOptions) -> CaseResult:
    """A result that names the case and its settings, before anything is measured."""
    workload_cls = get_workload_class(case.workload)
    return CaseResult(
        workload=case.workload, workload_version=workload_cls.version, mode=case.mode,
        device=case.device.name, batch_size=case.batch_size, precision=case.precision,
        compile_backend=case.compile_backend, channels_last=case.channels_last,
        prompt_len=case.prompt_len, new_tokens=case.new_tokens,
        streamed=bool(case.new_tokens) and options.stream, data=options.data, size=options.size,
        protocol=options.protocol if case.new_tokens else "",
        stop_rule=generation_rounds(options)[2] if case.new_tokens else options.stop.describe(),
        threads=torch.get_num_threads(), memory_source=case.device.memory_source,
    )


#: Generation rounds measured when ``--steps`` does not say how many.
DEFAULT_GENERATION_ROUNDS = 3


def generation_rounds(options: RunOptions) -> tuple[int, int, str]:
    """(measured rounds, warm-up rounds, the rule in words) of a generation case: ``--steps N``
    is N rounds, otherwise 3 (a --protocol's own count: llama-bench's 5 repetitions ...); one
    warm-up round unless ``--warmup 0``."""
    default = protocol(options.protocol).rounds if options.protocol else DEFAULT_GENERATION_ROUNDS
    rounds = int(options.stop.value) if options.stop.kind == "steps" else default
    warmup = 1 if options.warmup_steps else 0
    return rounds, warmup, f"{rounds} generation rounds"


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
        options=options.to_dict(),
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


#: A work's own settings: a dataclass of JSON values (strings, numbers, lists of them).
Settings = TypeVar("Settings")


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process runs: ``work``, the subcommand's own worker function as
    ``module:function`` (called with this spec and a Report), the run options, the case, and
    the work's own settings (check's reference and steps, probe's device and features, a
    scaling rank's plan), which the work reads back as its own dataclass with
    :meth:`settings_as`. Written to and read from JSON here only."""

    work: str
    options: RunOptions | None = None
    #: The case's fields, its device by name (the worker finds the device again).
    case: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, work: str, options: RunOptions | None = None, case: Case | None = None,
               settings: Any = None) -> WorkerSpec:
        """A spec for ``work``; ``settings``, when given, is the work's settings dataclass."""
        fields = None if case is None else {
            "workload": case.workload, "mode": case.mode, "device": case.device.name,
            "batch_size": case.batch_size, "precision": case.precision,
            "compile_backend": case.compile_backend, "channels_last": case.channels_last,
            "prompt_len": case.prompt_len, "new_tokens": case.new_tokens}
        return cls(work, options, fields, asdict(settings) if settings is not None else {})

    def run_options(self) -> RunOptions:
        if self.options is None:
            raise ValueError(f"the worker spec of {self.work} carries no run options")
        return self.options

    def rebuild_case(self, devices: DeviceSet) -> Case:
        if self.case is None:
            raise ValueError(f"the worker spec of {self.work} carries no case")
        fields = dict(self.case)
        return Case(device=devices.select(fields.pop("device"))[0], **fields)

    def settings_as(self, kind: type[Settings]) -> Settings:
        """The work's settings as the dataclass ``kind`` it wrote them from."""
        return kind(**self.settings)

    def to_json(self) -> str:
        return json.dumps({"work": self.work,
                           "options": self.options.to_dict() if self.options is not None else None,
                           "case": self.case, "settings": self.settings})

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        data = json.loads(text)
        options = data.get("options")
        return cls(data["work"], RunOptions.from_dict(options) if options is not None else None,
                   data.get("case"), data.get("settings", {}))
