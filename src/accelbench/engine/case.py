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
from typing import Any

import torch

from accelbench import __version__
from accelbench.devices import Device, DeviceSet
from accelbench.devices.environment import collect_environment
from accelbench.measure.loop import NonFiniteError
from accelbench.options import RunOptions
from accelbench.results import CaseResult, RunRecord
from accelbench.workloads.catalogue import get_workload_class
from accelbench.workloads.suites import suite_batch_size


@dataclass(frozen=True)
class Case:
    workload: str
    mode: str
    device: Device
    batch_size: int
    precision: str = "fp32"
    compile_backend: str = ""
    channels_last: bool = False

    @property
    def label(self) -> str:
        extras = [self.precision] if self.precision != "fp32" else []
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
        workload = get_workload_class(name)(options.size)
        for mode in options.modes:
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
        data=options.data, size=options.size, stop_rule=options.stop.describe(),
        threads=torch.get_num_threads(), memory_source=case.device.memory_source,
    )


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



@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process runs: ``work``, the subcommand's own worker function as
    ``module:function`` (called with this spec and a Report), the run options, the case, and
    the work's own settings (check's reference and steps, probe's device and features)."""

    work: str
    options: dict[str, Any] | None = None
    case: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_case(cls, work: str, options: RunOptions, case: Case, **settings: Any) -> WorkerSpec:
        fields = {"workload": case.workload, "mode": case.mode, "device": case.device.name,
                  "batch_size": case.batch_size, "precision": case.precision,
                  "compile_backend": case.compile_backend, "channels_last": case.channels_last}
        return cls(work, options.to_dict(), fields, settings)

    def run_options(self) -> RunOptions:
        if self.options is None:
            raise ValueError(f"the worker spec of {self.work} carries no run options")
        return RunOptions.from_dict(self.options)

    def rebuild_case(self, devices: DeviceSet) -> Case:
        if self.case is None:
            raise ValueError(f"the worker spec of {self.work} carries no case")
        fields = dict(self.case)
        return Case(device=devices.select(fields.pop("device"))[0], **fields)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        data = json.loads(text)
        return cls(data["work"], data.get("options"), data.get("case"), data.get("settings", {}))
