"""Batch-size sweeps through the ordinary runner: each batch size is a plan of cases run by
``run_plan``; the cases of every batch size go into one record of kind "sweep".

A batch that runs out of memory is status ``oom`` (as with ``--auto-batch``), and the larger
batches on that device are recorded as ``oom`` without running them (their error says so).
The analysis (saturation, crossover) is in ``sweep_analysis``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from accelbench.devices import DeviceSet
from accelbench.engine.case import Case, CaseProgress, plan, skeleton_result
from accelbench.engine.driver import Interrupted
from accelbench.engine.runner import run_plan
from accelbench.errors import UsageError
from accelbench.options import RunOptions
from accelbench.results import CaseResult, RunRecord
from accelbench.sweeps.analysis import SATURATION_FRACTION


def _key(case: Case | CaseResult) -> tuple[object, ...]:
    """A planned case and its result share this key (a result names its device by string)."""
    device = case.device if isinstance(case.device, str) else case.device.name
    return (case.workload, case.mode, device, case.precision, case.compile_backend,
            case.channels_last)


def run_sweep(options: RunOptions, devices: DeviceSet, batch_sizes: Sequence[int], command: list[str],
              progress: CaseProgress | None = None,
              on_case: Callable[[RunRecord], None] | None = None, live: bool = False) -> RunRecord:
    """One record (kind "sweep") holding every batch size's cases, smallest batch first;
    ``on_case`` gets the whole sweep so far after every case."""
    base_cases = plan(options, devices)
    if not base_cases:
        raise UsageError("nothing to sweep: no workload supports the requested modes")
    record: RunRecord | None = None
    ran_out: dict[tuple[object, ...], int] = {}
    for batch in sorted(batch_sizes):
        cases = [replace(case, batch_size=batch) for case in base_cases]
        skipped = [case for case in cases if _key(case) in ran_out]
        runnable = [case for case in cases if _key(case) not in ran_out]

        def keep(part: RunRecord, done: RunRecord | None = record) -> None:
            # The whole sweep so far, saved after every case, not only after every batch size.
            if on_case is not None:
                on_case(_merge(None, part) if done is None
                        else replace(done, cases=[*done.cases, *part.cases]))

        try:
            part = run_plan(options, devices, runnable, command, progress, on_case=keep, live=live)
        except Interrupted as stop:
            raise Interrupted(_merge(record, stop.record), stop.signal_name, stop.exit_code) from None
        record = _merge(record, part)
        record.cases.extend(_not_run(case, options, ran_out[_key(case)]) for case in skipped)
        for result in part.cases:
            if result.status == "oom":
                ran_out.setdefault(_key(result), result.batch_size)
        if on_case is not None and skipped:
            on_case(record)
    assert record is not None
    record.options["sweep"] = {"batch_sizes": sorted(batch_sizes),
                               "saturation_fraction": SATURATION_FRACTION}
    return record


def _merge(record: RunRecord | None, part: RunRecord) -> RunRecord:
    if record is None:
        part.kind = "sweep"
        return part
    record.cases.extend(part.cases)
    return record


def _not_run(case: Case, options: RunOptions, failed_batch: int) -> CaseResult:
    result = skeleton_result(case, options)
    result.status = "oom"
    result.error = (f"not run: batch {failed_batch} already ran out of memory on {case.device.name}")
    result.skipped = True
    return result


