"""Expand options into Cases and run them; every failure becomes a status with its error text."""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import torch

from accelbench import __version__
from accelbench.devices import Device, DeviceSet
from accelbench.environment import collect_environment
from accelbench.measure.loop import NonFiniteError, Progress, StepLoop
from accelbench.options import RunOptions
from accelbench.results import CaseResult, RunRecord
from accelbench.workloads.base import DataOptions, Workload, get_workload_class


@dataclass(frozen=True)
class Case:
    workload: str
    mode: str
    device: Device
    batch_size: int
    precision: str = "fp32"

    @property
    def label(self) -> str:
        return f"{self.workload} {self.mode} on {self.device.name} (batch {self.batch_size})"


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
            batch = options.batch_size or workload.batch_size(mode)
            cases.extend(Case(name, mode, device, batch) for device in chosen)
    return cases


def _epoch_samples(batches: Iterable[Any], fallback: int) -> int:
    dataset = getattr(batches, "dataset", None)
    if dataset is not None and hasattr(dataset, "__len__"):
        return len(dataset)
    return int(getattr(batches, "dataset_size", fallback))


def _make_step(workload: Workload, model: torch.nn.Module, case: Case) -> Callable[[Any], Any]:
    target = case.device.torch_device
    non_blocking = not case.device.is_cpu
    if case.mode == "train":
        optimizer = workload.make_optimizer(model)
        model.train()

        def train(batch: Any) -> Any:
            return workload.train_step(model, optimizer,
                                       workload.to_device(batch, target, non_blocking))
        return train

    model.eval()

    def evaluate(batch: Any) -> Any:
        with torch.no_grad():
            return workload.eval_step(model, workload.to_device(batch, target, non_blocking))
    return evaluate


def _status_of(error: BaseException) -> str:
    if isinstance(error, NonFiniteError):
        return "nan"
    if isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower():
        return "oom"
    if isinstance(error, NotImplementedError):
        return "unsupported"
    return "failed"


def run_case(case: Case, options: RunOptions, progress: Progress | None = None) -> CaseResult:
    """Set up, warm up and measure one case. Exceptions become the result's status."""
    workload = get_workload_class(case.workload)(options.size)
    result = CaseResult(
        workload=case.workload, workload_version=workload.version, mode=case.mode,
        device=case.device.name, batch_size=case.batch_size, precision=case.precision,
        data=options.data, size=options.size, stop_rule=options.stop.describe(),
        threads=torch.get_num_threads(), memory_source=case.device.memory_source,
    )
    try:
        result.device_name = str(case.device.info().get("name", case.device.name))
    except Exception as error:  # describing the device is not worth failing the case over
        result.device_name = f"{case.device.name} ({type(error).__name__})"
    unavailable = workload.unavailable_reason()
    if unavailable:
        result.status, result.error = "unavailable", unavailable
        return result
    try:
        torch.manual_seed(options.seed)
        case.device.reset_peak_memory()
        model = workload.build_model().to(case.device.torch_device)
        data = DataOptions(kind=options.data, data_dir=options.data_dir, seed=options.seed,
                           workers=options.workers, pin_memory=not case.device.is_cpu)
        batches = workload.make_batches(case.mode, case.batch_size, data)
        result.dataset_size = _epoch_samples(batches, workload.samples_per_epoch(case.mode))
        result.steps_per_epoch = -(-result.dataset_size // case.batch_size)
        epoch_end = None
        if case.mode == "train" and type(workload).end_of_epoch is not Workload.end_of_epoch:
            def epoch_end() -> dict[str, float]:
                return workload.end_of_epoch(model, case.device.torch_device, data)
        loop = StepLoop(_make_step(workload, model, case), batches, case.device, progress,
                        epoch_end)
        measured = loop.run(options.stop, options.warmup_steps)
        for name, value in vars(measured).items():
            setattr(result, name, value)
        result.peak_memory_bytes = case.device.peak_memory_bytes()
    except Exception as error:
        result.status = _status_of(error)
        result.error = f"{type(error).__name__}: {error}".strip()
        if isinstance(error, NonFiniteError):
            result.extra["nonfinite_step"] = error.step
        result.extra["traceback"] = traceback.format_exc(limit=8)
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


def run_plan(options: RunOptions, devices: DeviceSet, cases: list[Case], command: list[str],
             progress: CaseProgress | None = None) -> RunRecord:
    """Run every case in order; the record is complete even when cases fail."""
    if options.threads:
        torch.set_num_threads(options.threads)
    record = new_record(options, devices, command)
    for case in cases:
        case_progress = None
        if progress is not None:
            def case_progress(phase: str, done: float, total: float | None,
                              _case: Case = case) -> None:
                progress(_case, phase, done, total)
        record.cases.append(run_case(case, options, case_progress))
    return record
