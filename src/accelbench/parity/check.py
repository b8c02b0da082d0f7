"""``accelbench check`` as a library call: parity of every workload x device x precision x compile."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from accelbench.devices import DeviceSet
from accelbench.devices.numerics import backend_flags, get_precision, precision_settings, unsupported_reason
from accelbench.engine.case import (
    Case,
    new_record,
    plan,
    prepare_worker,
    record_error,
    skeleton_result,
    status_of,
)
from accelbench.engine.driver import drive
from accelbench.engine.launchers.backends import check_worlds
from accelbench.engine.launchers.base import Progress, Report
from accelbench.engine.launchers.torchrun import World
from accelbench.engine.measure_case import quantized_unsupported
from accelbench.engine.progress import ItemProgress
from accelbench.engine.runner import launch_plan
from accelbench.engine.spec import CaseSpec, model_files_for
from accelbench.engine.work import CaseWork
from accelbench.options.check import CheckOptions
from accelbench.options.recorded import RecordedCheck
from accelbench.parity.core import run_parity
from accelbench.results import CaseResult, Parity, RunRecord
from accelbench.results.generation import Generation
from accelbench.workloads.catalogue import get_workload_class
from accelbench.workloads.presets import GENERATE


def _verdict_status(parity: dict) -> tuple[str, str]:
    verdict = parity["verdict"]
    if verdict in ("pass", "drift", "inconclusive"):
        return "ok", ""
    if verdict == "non-finite":
        return "nan", (f"non-finite (NaN/Inf) at step {parity['first_bad_step']} in "
                       f"{parity.get('bad_tensor', 'loss')}")
    tolerance = parity["tolerance"]["drift"]
    return "failed", (f"diverged from the reference at step {parity['first_bad_step']} (relative "
                      f"loss difference {parity.get('max_rel_loss_diff', float('nan')):.3g} > {tolerance:g})")


def check_skeleton(case: Case, options: CheckOptions) -> CaseResult:
    result = skeleton_result(case, options.run)
    result.stop_rule = f"{options.steps} steps (parity)"
    return result


def check_case(case: Case, options: CheckOptions, devices: DeviceSet) -> CaseResult:
    """The parity of one case in this process, with its device current throughout (work that
    names no device, a timing event or a stream, goes to it) and the device current before
    current again after: an inline check (``--isolation none``) over several devices leaks none
    into the next case."""
    with contextlib.ExitStack() as current:
        try:
            current.enter_context(case.device.current())
        except Exception as error:  # a device that cannot be selected is the case's status
            result = record_error(check_skeleton(case, options), error)
            result.parity = Parity("failed", error=result.error)
            return result
        return _check_case_here(case, options, devices)


def _check_case_here(case: Case, options: CheckOptions, devices: DeviceSet) -> CaseResult:
    run = options.run
    result = check_skeleton(case, options)
    workload_cls = get_workload_class(case.workload)
    unavailable = workload_cls(run.size).unavailable_reason() or unsupported_reason(
        case.device, get_precision(case.precision)) or quantized_unsupported(case)
    if unavailable:
        result.status, result.error = "unsupported", unavailable
        result.parity = Parity("failed", error=unavailable)
        return result
    with precision_settings(get_precision(case.precision), case.device):
        result.backend_flags = backend_flags(case.device)  # what the candidate ran under
    if case.mode == GENERATE:
        return _check_generation(case, options, result)
    try:
        parity = run_parity(workload_cls, run.size, case.device, case.precision, case.compile_backend,
                            case.channels_last, options.reference, devices.select("cpu")[0],
                            options.steps, case.batch_size, run.seed)
        result.status, result.error = _verdict_status(parity)
    except Exception as error:
        result.status = status_of(error)
        result.error = f"{type(error).__name__}: {error}".strip()
        result.traceback = traceback.format_exc(limit=8)
        parity = {"verdict": "failed", "error": result.error}
    result.parity = Parity.from_dict(parity, "parity")
    return result


def _check_generation(case: Case, options: CheckOptions, result: CaseResult) -> CaseResult:
    """``check --mode generate``: the same weights and prompt decoded greedily on the candidate
    (compiled where the case is) and on the CPU (``--reference``: fp64 or fp32); the verdict
    names the first position where the tokens differ."""
    from accelbench.parity.generation import run_generation_check

    precision = get_precision(case.precision)
    workload = get_workload_class(case.workload)(options.run.size)
    with precision_settings(precision, case.device):
        verdict = run_generation_check(
            workload, workload.build_model, case.device, precision,
            batch_size=case.batch_size, prompt_len=case.prompt_len, new_tokens=case.new_tokens,
            seed=options.run.seed, reference=options.reference,
            compile_backend=case.compile_backend)
    result.generation = Generation(parity=verdict)
    result.parity = Parity.from_dict({"verdict": verdict.verdict, "error": verdict.error}, "parity")
    result.stop_rule = f"{case.new_tokens} greedy tokens (parity)"
    if verdict.verdict not in ("pass", "drift"):
        result.status, result.error = "failed", verdict.message or verdict.error
    return result


class CheckWork(CaseWork[Case]):
    """``check``'s per-case work: the parity of one case (the CPU reference runs beside it, in
    the same process)."""

    worker = "accelbench.parity.check:check_from_spec"

    def __init__(self, options: CheckOptions, devices: DeviceSet) -> None:
        self.options, self.devices = options, devices

    def label(self, case: Case) -> str:
        return f"check {case.label}"

    def skeleton(self, case: Case) -> CaseResult:
        return check_skeleton(case, self.options)

    def inline(self, case: Case, progress: Progress | None) -> CaseResult:
        return check_case(case, self.options, self.devices)

    def spec(self, case: Case) -> CaseSpec:
        return CaseSpec(self.worker, self.options.run, case,
                        CheckSettings(self.options.reference, self.options.steps),
                        model_files_for(case.workload))

    def world(self, case: Case) -> World:
        return World.on_one_node(self.options.run.nproc, case.device, self.options.run.threads)


@dataclass(frozen=True)
class CheckSettings:
    """What a check worker needs beside the run options and the case."""

    reference: str
    steps: int


def check_from_spec(spec: CaseSpec, report: Report) -> CaseResult:
    """The worker's side of CheckWork."""
    run = spec.run_options()
    prepare_worker(run)
    devices = DeviceSet.current()
    settings = spec.settings_as(CheckSettings)
    options = CheckOptions(run=run, reference=settings.reference, steps=settings.steps)
    return check_case(spec.the_case(), options, devices)


def check_record(options: CheckOptions, devices: DeviceSet, command: list[str]) -> RunRecord:
    record = new_record(options.run, devices, command)
    record.kind = "check"
    record.options = RecordedCheck(options.run, reference=options.reference,
                                   check_steps=options.steps)
    return record


def run_check(options: CheckOptions, devices: DeviceSet, command: list[str],
              progress: ItemProgress | None = None,
              on_case: Callable[[RunRecord], None] | None = None, live: bool = False) -> RunRecord:
    """Check every case of the plan through the driver: each in a worker process unless
    ``options.run.isolation`` is "none" (at --size tiny, as ``run``'s, the cases share one warm
    worker per device: its start-up paid once). SIGINT and SIGTERM raise ``Interrupted`` carrying
    the finished cases; ``live`` shows the progress display."""
    cases = plan(options.run, devices)
    check_worlds(options.run, devices, (case.device for case in cases))
    return drive(CheckWork(options, devices), cases, check_record(options, devices, command),
                 launch=launch_plan(options.run), progress=progress, on_case=on_case, live=live)
