"""``accelbench check`` as a library call: parity of every workload x device x precision x compile."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass

from accelbench.devices import DeviceSet
from accelbench.errors import UsageError
from accelbench.options import RunOptions
from accelbench.parity import REFERENCES, run_parity
from accelbench.precision import backend_flags, get_precision, precision_settings, unsupported_reason
from accelbench.results import CaseResult, Parity, RunRecord
from accelbench.runner import Case, new_record, plan, skeleton_result, status_of
from accelbench.workloads.base import get_workload_class

DEFAULT_CHECK_STEPS = 50


@dataclass(frozen=True)
class CheckOptions:
    run: RunOptions
    reference: str = "cpu-fp64"
    steps: int = DEFAULT_CHECK_STEPS

    def __post_init__(self) -> None:
        if self.reference not in REFERENCES:
            raise UsageError(f"--reference {self.reference!r} is unknown; allowed: "
                             f"{', '.join(REFERENCES)}")
        if self.steps <= 0:
            raise UsageError(f"--steps must be positive, got {self.steps}")


def _verdict_status(parity: dict) -> tuple[str, str]:
    verdict = parity["verdict"]
    if verdict in ("pass", "drift"):
        return "ok", ""
    if verdict == "non-finite":
        return "nan", (f"non-finite (NaN/Inf) at step {parity['first_bad_step']} in "
                       f"{parity.get('bad_tensor', 'loss')}")
    tolerance = parity["tolerance"]["drift"]
    return "failed", (f"diverged from the reference at step {parity['first_bad_step']} (max relative "
                      f"loss difference {parity.get('max_rel_loss_diff', float('nan')):.3g} > {tolerance:g})")


def check_case(case: Case, options: CheckOptions, devices: DeviceSet) -> CaseResult:
    run = options.run
    result = skeleton_result(case, run)
    result.stop_rule = f"{options.steps} steps (parity)"
    workload_cls = get_workload_class(case.workload)
    unavailable = workload_cls(run.size).unavailable_reason() or unsupported_reason(
        case.device, get_precision(case.precision))
    if unavailable:
        result.status, result.error = "unsupported", unavailable
        result.parity = Parity("failed", error=unavailable)
        return result
    with precision_settings(get_precision(case.precision)):
        result.backend_flags = backend_flags()  # what the candidate ran under
    try:
        case.device.make_current()
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


def run_check(options: CheckOptions, devices: DeviceSet, command: list[str],
              progress: Callable[[Case], None] | None = None) -> RunRecord:
    record = new_record(options.run, devices, command)
    record.kind = "check"
    record.options["reference"] = options.reference
    record.options["check_steps"] = options.steps
    for case in plan(options.run, devices):
        if progress is not None:
            progress(case)
        record.cases.append(check_case(case, options, devices))
    return record
