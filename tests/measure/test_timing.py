"""The timing fields are declared once (measure/loop/timing.py): the loop fills them, a case's result
is one, and the result file keeps its keys in the order it always had."""

from __future__ import annotations

import dataclasses
import json

import torch

from accelbench.data.synthetic import EpochBatches
from accelbench.devices.base import Device
from accelbench.devices.cpu import CpuAdapter
from accelbench.measure.loop.step_loop import StepLoop
from accelbench.measure.loop.timing import Timing
from accelbench.options import StopRule
from accelbench.results import CaseResult, RunRecord

#: A case's keys in a result file, in order, as written before the fields were declared once
#: (and since issue 21: the generation fields after steps_per_epoch, ``generation`` after profile).
FILE_KEYS = [
    "workload", "mode", "device", "batch_size", "workload_version", "device_name", "precision",
    "compile_backend", "channels_last", "data", "size", "status", "error", "threads", "stop_rule",
    "dataset_size", "steps_per_epoch", "prompt_len", "new_tokens", "tokens_per_sample", "streamed",
    "protocol",
    "step_times", "steps_per_sample", "warmup_steps",
    "time_to_first_step_s", "warmup_time_s", "input_wait_s", "measured_time_s", "measured_steps",
    "epoch_times", "epoch_end_s", "metrics", "input_wait_method", "input_fetch_s", "target_ci_pct",
    "stop_reason", "sync_s", "setup_peak_memory_bytes", "peak_memory_bytes", "memory_source",
    "memory_is_lower_bound",
    "repeats", "parity", "energy", "flops", "sensors", "scale", "profile", "generation", "sustained",
    "break_even", "start", "backend_flags",
    "oom_batch_sizes", "nonfinite_step", "traceback", "stderr_tail", "isolation", "skipped", "derived",
]


def _measured() -> Timing:
    batches = EpochBatches([(torch.zeros(4, 2),)], 10, 4)
    return StepLoop(lambda batch: batch[0].sum(), batches, Device(CpuAdapter(), "cpu", 0)).run(
        StopRule("steps", 3), warmup_steps=1)


def test_a_case_result_is_the_loops_timing_and_keeps_the_file_order() -> None:
    assert issubclass(CaseResult, Timing)
    case = CaseResult(workload="w", mode="train", device="cpu", batch_size=4)
    assert list(case.to_dict()) == FILE_KEYS
    timing = [spec.name for spec in dataclasses.fields(Timing)]
    assert FILE_KEYS[FILE_KEYS.index("step_times"):][:len(timing)] == timing


def test_the_loops_figures_reach_the_result_file_and_nothing_else_is_touched() -> None:
    measured = _measured()
    case = CaseResult(workload="w", mode="train", device="cpu", batch_size=4, status="ok", dataset_size=10,
                      steps_per_epoch=3)
    measured.copy_into(case)
    data = json.loads(json.dumps(RunRecord.from_dict(RunRecord(
        run_id="r", created_at="2024-01-01T00:00:00+0000", accelbench_version="0", kind="run",
        cases=[case]).to_dict()).to_dict()))["cases"][0]
    for spec in dataclasses.fields(Timing):
        assert data[spec.name] == getattr(measured, spec.name), spec.name
    assert data["measured_steps"] == 3 and len(data["step_times"]) == 3 and data["stop_reason"] == "steps"
    assert (data["workload"], data["dataset_size"], data["steps_per_epoch"]) == ("w", 10, 3)
