"""Sweeps through the ordinary runner: each value of the swept axis (the batch size, or for
generation the prompt length) is a plan of cases run by ``run_plan``; the cases of every value
go into one record of kind "sweep".

A value that runs out of memory is status ``oom`` (as with ``--auto-batch``), and the larger
values on that device are recorded as ``oom`` without running them (their error says so).
The analysis (saturation, crossover) is in ``sweep_analysis``; a prompt-length sweep's (decode
speed and memory against context) in ``render/generation_sweep.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from accelbench.devices import DeviceSet
from accelbench.engine.case import Case, CaseProgress, plan, skeleton_result
from accelbench.engine.driver import Interrupted
from accelbench.engine.runner import run_plan
from accelbench.errors import UsageError
from accelbench.options import RunOptions
from accelbench.options.recorded import RecordedSweep, SweepPlan
from accelbench.results import CaseResult, RunRecord
from accelbench.results.case_key import key_values
from accelbench.sweeps.analysis import SATURATION_FRACTION


def _key(case: Case | CaseResult, axis: str) -> tuple[object, ...]:
    """A planned case and its result share this key: the device (a result names it by string)
    and every field of the comparability key but the swept one."""
    device = case.device if isinstance(case.device, str) else case.device.name
    return (device, *(value for name, value in key_values(case).items() if name != axis))


#: The axes a sweep runs along: a Case field, and how its value is named in words.
AXES = {"batch_size": "batch", "prompt_len": "prompt"}


def run_sweep(options: RunOptions, devices: DeviceSet, batch_sizes: Sequence[int], command: list[str],
              progress: CaseProgress | None = None,
              on_case: Callable[[RunRecord], None] | None = None, live: bool = False,
              axis: str = "batch_size") -> RunRecord:
    """One record (kind "sweep") holding the cases of every value of ``axis`` (``batch_sizes``
    holds the values: batch sizes, or prompt lengths for ``axis="prompt_len"``), smallest
    first; ``on_case`` gets the whole sweep so far after every case."""
    if axis == "prompt_len":
        plan(replace(options, prompt_lens=tuple(batch_sizes)), devices)  # each prompt must fit
        options = replace(options, prompt_lens=(min(batch_sizes),))
    base_cases = plan(options, devices)
    if not base_cases:
        raise UsageError("nothing to sweep: no workload supports the requested modes")
    record: RunRecord | None = None
    ran_out: dict[tuple[object, ...], int] = {}
    for batch in sorted(batch_sizes):
        point: dict[str, Any] = {axis: batch}  # the swept field: batch_size or prompt_len
        cases = [replace(case, **point) for case in base_cases]
        skipped = [case for case in cases if _key(case, axis) in ran_out]
        runnable = [case for case in cases if _key(case, axis) not in ran_out]

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
        record.cases.extend(_not_run(case, options, ran_out[_key(case, axis)], axis) for case in skipped)
        for result in part.cases:
            if result.status == "oom":
                ran_out.setdefault(_key(result, axis), getattr(result, axis))
        if on_case is not None and skipped:
            on_case(record)
    assert record is not None
    values = sorted(batch_sizes)
    swept = (SweepPlan(batch_sizes=tuple(values), saturation_fraction=SATURATION_FRACTION)
             if axis == "batch_size" else SweepPlan(axis=axis, prompt_lens=tuple(values)))
    record.options = RecordedSweep(record.options.run_options() or options, sweep=swept)
    return record


def _merge(record: RunRecord | None, part: RunRecord) -> RunRecord:
    if record is None:
        part.kind = "sweep"
        return part
    record.cases.extend(part.cases)
    return record


def _not_run(case: Case, options: RunOptions, failed: int, axis: str = "batch_size") -> CaseResult:
    result = skeleton_result(case, options)
    result.status = "oom"
    result.error = f"not run: {AXES[axis]} {failed} already ran out of memory on {case.device.name}"
    result.skipped = True
    return result


