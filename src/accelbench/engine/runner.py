"""Expand options into Cases and run them; every failure becomes a status with its error text."""

from __future__ import annotations

import contextlib
import traceback
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

import torch

from accelbench import __version__
from accelbench.data.options import DataOptions
from accelbench.data.placement import POOL_LABEL, device_pool_bytes, place_batches, source_kind
from accelbench.devices import Device, DeviceSet
from accelbench.devices.environment import collect_environment
from accelbench.devices.numerics import (
    Precision,
    backend_flags,
    get_precision,
    precision_settings,
    prepare_model,
    unsupported_reason,
)
from accelbench.engine.driver import Interrupted as Interrupted  # re-exported: callers catch it here
from accelbench.engine.driver import Terminated as Terminated
from accelbench.engine.driver import drive
from accelbench.engine.launch import CaseWork, Report
from accelbench.engine.steps import make_eval_step, make_train_step
from accelbench.measure.energy import energy_meter_for
from accelbench.measure.loop import NonFiniteError, Progress, StepLoop
from accelbench.measure.trackers import EnergyTracker, MemoryTracker, SensorTracker
from accelbench.options import RunOptions
from accelbench.results import CaseResult, Energy, Flops, RunRecord, Sensors
from accelbench.workloads.base import Workload, get_workload_class
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


def _epoch_samples(batches: Iterable[Any], fallback: int) -> int:
    dataset = getattr(batches, "dataset", None)
    if dataset is not None and hasattr(dataset, "__len__"):
        return len(dataset)
    return int(getattr(batches, "dataset_size", fallback))


def _make_step(workload: Workload, model: torch.nn.Module, case: Case) -> Callable[[Any], Any]:
    precision = get_precision(case.precision)
    # Compiled: the full batch's graphs stay static when an epoch's partial batch comes (steps.py).
    static_batch = case.batch_size if case.compile_backend else None
    if case.mode == "train":
        optimizer = workload.make_optimizer(model)
        return make_train_step(workload, model, optimizer, case.device, precision,
                               case.channels_last, static_batch=static_batch)
    return make_eval_step(workload, model, case.device, precision, case.channels_last,
                          static_batch=static_batch)


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


def run_case(case: Case, options: RunOptions, progress: Progress | None = None) -> CaseResult:
    """Set up, warm up and measure one case in this process. Exceptions become its status.

    The case's device is current for all of it, from before anything touches the device
    (otherwise cuda:N's pinned-memory threads, stray allocations and timing events land on
    GPU 0) to after its peak is measured; the device current before is current again after, so
    an inline run (``--isolation none``) over several devices leaks none into the next case."""
    with contextlib.ExitStack() as current:
        try:
            current.enter_context(case.device.current())
        except Exception as error:  # a device that cannot be selected is the case's status
            return record_error(skeleton_result(case, options), error)
        return _run_case_here(case, options, progress)


def record_error(result: CaseResult, error: Exception) -> CaseResult:
    """``result`` with ``error`` as its status, error text and traceback."""
    result.status = status_of(error)
    result.error = f"{type(error).__name__}: {error}".strip()
    if isinstance(error, NonFiniteError):
        result.nonfinite_step = error.step
    result.traceback = traceback.format_exc(limit=8)
    return result


def _run_case_here(case: Case, options: RunOptions, progress: Progress | None) -> CaseResult:
    workload = get_workload_class(case.workload)(options.size)
    result = skeleton_result(case, options)
    try:
        result.device_name = str(case.device.info().get("name", case.device.name))
    except Exception as error:  # describing the device is not worth failing the case over
        result.device_name = f"{case.device.name} ({type(error).__name__})"
    unavailable = workload.unavailable_reason()
    if unavailable:
        result.status, result.error = "unavailable", unavailable
        return result
    precision = get_precision(case.precision)
    unsupported = unsupported_reason(case.device, precision)
    if unsupported:
        result.status, result.error = "unsupported", unsupported
        return result
    try:
        with precision_settings(precision, case.device, cudnn_benchmark=options.cudnn_benchmark):
            result.backend_flags = backend_flags(case.device)  # fp32 = TF32 off, in the record
            _measure(case, workload, options, result, progress)
    except Exception as error:
        record_error(result, error)
    if result.ok:
        result.flops = Flops.from_dict(achieved_flops(result, case.device, precision), "flops")
    return result


def achieved_flops(result: CaseResult, device: Device, precision: Precision) -> dict[str, Any]:
    """Achieved FLOP/s (counted FLOPs per sample x samples/s) and its fraction of the device's
    matrix-product peak measured under the case's own precision settings (a tf32 case against
    TF32 products, amp-bf16 against bf16 autocast). The peak used is stored with the figures
    (value, settings, when measured); a case that beats the cached peak has it measured again."""
    from accelbench.measure.peak import peak_figure
    from accelbench.models.facts import flops_per_sample

    dtype = precision.autocast_dtype or precision.param_dtype
    figures: dict[str, Any] = {"peak_dtype": str(dtype).removeprefix("torch."),
                               "peak_precision": precision.name}
    try:
        per_sample = flops_per_sample(result.workload, result.mode, result.size)
        throughput = result.throughput()
        if per_sample is None or throughput is None:
            return {**figures, "error": "FLOPs could not be counted for this workload"}
        achieved = per_sample * throughput
        peak = peak_figure(device, precision, at_least=achieved)
        figures.update(per_sample=per_sample, achieved_flops=achieved, **peak.to_dict(),
                       fraction_of_peak=achieved / peak.flops if peak.flops > 0 else None)
    except Exception as error:  # the figures are extra; the timing stands without them
        figures["error"] = f"{type(error).__name__}: {error}"
    return figures


def _measure(case: Case, workload: Workload, options: RunOptions, result: CaseResult,
             progress: Progress | None) -> None:
    torch.manual_seed(options.seed)
    memory = MemoryTracker(case.device)
    # Sensors, then energy: exited in reverse, so the energy window hugs the measured steps.
    sensors, energy = SensorTracker(case.device), EnergyTracker(energy_meter_for(case.device))
    with memory:  # the whole case: building the model, warm-up and the measured steps
        model = prepare_model(workload.build_model(), get_precision(case.precision),
                              case.channels_last).to(case.device.torch_device)
        if case.compile_backend:
            model = torch.compile(model, backend=case.compile_backend)
        data = DataOptions(kind=source_kind(options.data), data_dir=options.data_dir,
                           seed=options.seed, workers=options.workers,
                           pin_memory=case.device.pin_memory)
        pool = workload.make_batches(case.mode, case.batch_size, data)
        if options.data == "synthetic-device":  # its pool is the harness's memory, not the model's
            memory.note_peak()
        batches = place_batches(pool, options.data, case.device)
        memory.set_aside(device_pool_bytes(batches, options.data, case.device), POOL_LABEL)
        del pool  # the host copy of a device-resident pool is not kept
        result.dataset_size = _epoch_samples(batches, workload.samples_per_epoch(case.mode))
        result.steps_per_epoch = -(-result.dataset_size // case.batch_size)
        epoch_end = None
        if case.mode == "train" and type(workload).end_of_epoch is not Workload.end_of_epoch:
            def epoch_end() -> dict[str, float]:
                return workload.end_of_epoch(model, case.device.torch_device, data)
        energy.prepare()  # probing the sources takes up to ~1 s: before warm-up, not in the window
        loop = StepLoop(_make_step(workload, model, case), batches, case.device, progress,
                        epoch_end, trackers=[sensors, energy], batch_size=case.batch_size,
                        partial_batch=result.dataset_size % case.batch_size)
        measured = loop.run(options.stop, options.warmup_steps)
    measured.copy_into(result)
    _record_trackers(result, memory, sensors, energy, loop.window_steps)
    if options.profile:  # after the peak is read: the profiler's own memory must not count
        from accelbench.measure.loop import BatchStream
        from accelbench.measure.profile import profile_case

        result.profile = profile_case(loop.step, BatchStream(batches).next, case.device, model)


def _record_trackers(result: CaseResult, memory: MemoryTracker, sensors: SensorTracker,
                     energy: EnergyTracker, window_steps: int) -> None:
    """The one place the trackers' typed results reach the case's record."""
    peak = memory.result
    result.peak_memory_bytes, result.memory_source = peak.bytes, peak.source
    result.memory_is_lower_bound = peak.lower_bound
    # Read just before and right after the measured steps (after warm-up, not at idle).
    result.sensors = Sensors.from_dict(sensors.result.to_dict(), "sensors")
    reading = energy.result
    if reading is not None:
        result.energy = Energy.from_dict(reading.figures(window_steps, result.steps_per_epoch,
                                                         result.batch_size), "energy")


def new_record(options: RunOptions, devices: DeviceSet, command: list[str]) -> RunRecord:
    return RunRecord(
        run_id=uuid.uuid4().hex[:12],
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        accelbench_version=__version__,
        command=command,
        options=options.to_dict(),
        environment=collect_environment(devices),
    )


def case_spec(case: Case) -> dict[str, Any]:
    """The case as JSON for a worker process (the device by name)."""
    return {"workload": case.workload, "mode": case.mode, "device": case.device.name,
            "batch_size": case.batch_size, "precision": case.precision,
            "compile_backend": case.compile_backend, "channels_last": case.channels_last}


def case_from_spec(fields: dict[str, Any], devices: DeviceSet) -> Case:
    fields = dict(fields)
    return Case(device=devices.select(fields.pop("device"))[0], **fields)


def prepare_worker(options: RunOptions) -> None:
    """A worker process sees the parent's user workloads and thread count."""
    from pathlib import Path

    from accelbench.workloads.userfile import load_workload_file

    for path in options.workload_files:
        load_workload_file(Path(path))
    if options.threads:
        torch.set_num_threads(options.threads)


class RunWork(CaseWork[Case]):
    """``run``'s per-case work: measure the case; with --auto-batch, halve the batch after
    out-of-memory until it fits (as timm's benchmark does), each try in a fresh launch."""

    kind = "run"

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.isolation, self.timeout = options.isolation, options.case_timeout

    def label(self, case: Case) -> str:
        return case.label

    def skeleton(self, case: Case) -> CaseResult:
        return skeleton_result(case, self.options)

    def inline(self, case: Case, progress: Progress | None) -> CaseResult:
        return run_case(case, self.options, progress)

    def spec(self, case: Case) -> dict[str, Any]:
        return {"options": self.options.to_dict(), "case": case_spec(case)}

    def next_round(self, case: Case, first: CaseResult) -> Case:
        # Later rounds use the batch the first one settled on (--auto-batch may have halved it).
        return replace(case, batch_size=first.batch_size)

    def run(self, case: Case, progress: Progress | None) -> CaseResult:
        failed_batches: list[int] = []
        while True:
            result = super().run(case, progress)
            if result.status != "oom" or not self.options.auto_batch or case.batch_size == 1:
                break
            failed_batches.append(case.batch_size)
            case = replace(case, batch_size=max(1, case.batch_size // 2))
        if failed_batches:
            result.oom_batch_sizes = failed_batches
        return result


def run_with_auto_batch(case: Case, options: RunOptions, progress: Progress | None) -> CaseResult:
    """One case through its launcher (benchmarks/ measure the isolation path with it)."""
    return RunWork(options).run(case, progress)


def run_from_spec(spec: dict[str, Any], report: Report) -> CaseResult:
    """The worker's side of RunWork."""
    options = RunOptions.from_dict(spec["options"])
    prepare_worker(options)
    return run_case(case_from_spec(spec["case"], DeviceSet.current()), options, report.progress)


def run_plan(options: RunOptions, devices: DeviceSet, cases: list[Case], command: list[str],
             progress: CaseProgress | None = None,
             on_case: Callable[[RunRecord], None] | None = None, live: bool = False) -> RunRecord:
    """Run every case (``options.repeat`` times, in interleaved rounds) through the driver; the
    record is complete even when cases fail.

    ``on_case`` is called with the record after each case process (to save it as it grows).
    SIGINT and SIGTERM raise Interrupted carrying the record; ``live`` shows the progress
    display (see ``engine.driver.drive``).
    """
    if options.threads:
        torch.set_num_threads(options.threads)
    record = new_record(options, devices, command)
    case_progress = None
    if progress is not None:
        def case_progress(index: int, phase: str, done: float, total: float | None) -> None:
            progress(cases[index], phase, done, total)
    return drive(RunWork(options), cases, record, progress=case_progress, on_case=on_case,
                 repeat=options.repeat, cooldown=options.cooldown, live=live)
