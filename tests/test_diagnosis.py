"""The diagnosis rules: each word from the figures that support it (recorded CUDA traces and
constructed ceilings, since this machine has no GPU)."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from accelbench.devices import DeviceSet
from accelbench.errors import UsageError
from accelbench.measure.profile import analyse_trace, roofline_ceilings
from accelbench.render.diagnosis import bytes_moved_per_step, diagnose
from accelbench.results import CaseResult, Ceilings, Flops, Profile, ProfileFigures

PROFILES = Path(__file__).parent / "data" / "profiles"
H100_CEILINGS = {"memory_bandwidth_bytes_per_s": 3.35e12, "launch_latency_s": 4e-6,
                 "matmul_flops": {"float16": 7.0e14, "float32": 5.0e13}}


@dataclass(frozen=True)
class Roofline:
    """The interface ``accelbench.measure.roofline.device_roofline`` returns (built elsewhere)."""

    matmul_flops: dict[str, float] = field(default_factory=dict)
    memory_bandwidth_bytes_per_s: float = 0.0
    launch_latency_s: float = 0.0
    h2d_bytes_per_s: float = 0.0
    d2h_bytes_per_s: float = 0.0


def _case(profile: ProfileFigures | None, step_s: float, *, flops_fraction: float | None = None,
          ceilings: dict[str, Any] | None = None, input_wait: float = 0.0, mode: str = "train",
          device: str = "cuda:0") -> CaseResult:
    peak = 5e13
    steps = [step_s * (1 + 0.01 * (i % 3 - 1)) for i in range(10)]  # median: step_s
    return CaseResult(workload="w", mode=mode, device=device, batch_size=64, step_times=steps,
                      measured_time_s=sum(steps), input_wait_s=input_wait * sum(steps),
                      profile=None if profile is None else Profile(
                          profile, Ceilings.from_dict(ceilings or {}, "ceilings")),
                      flops=None if flops_fraction is None else Flops(
                          achieved_flops=flops_fraction * peak, peak_flops=peak,
                          fraction_of_peak=flops_fraction))


def _recorded(name: str, steps: int, parameter_bytes: int = 0) -> ProfileFigures:
    trace = json.loads((PROFILES / name).read_text())
    return analyse_trace(trace, steps, device_is_cpu=False, parameter_bytes=parameter_bytes)


def test_recorded_small_kernels_with_an_idle_gpu_are_launch_bound() -> None:
    figures = _recorded("cuda_launch_bound.json", 4)
    diagnosis = diagnose(_case(figures, 430e-6, flops_fraction=0.01, ceilings=H100_CEILINGS))
    assert diagnosis is not None and diagnosis.word == "launch-bound"
    assert "device busy 20% of the step" in diagnosis.line
    assert "20 kernels/step, median 4 µs" in diagnosis.line
    # 20 launches x 4 µs launch latency = 80 µs of a 430 µs step.
    assert diagnosis.figures["launch_floor_fraction"] == pytest.approx(20 * 4e-6 / 430e-6, rel=0.02)
    assert "launch floor 19% of the step" in diagnosis.line


def test_recorded_busy_gemms_near_the_peak_are_compute_bound() -> None:
    figures = _recorded("cuda_compute_bound.json", 3)
    diagnosis = diagnose(_case(figures, 9.3e-3, flops_fraction=0.72, ceilings=H100_CEILINGS))
    assert diagnosis is not None and diagnosis.word == "compute-bound"
    assert "72% of the FLOP/s peak (36,000 of 50,000 GFLOP/s)" in diagnosis.line
    assert "device busy 99% of the step" in diagnosis.line


def test_the_same_busy_trace_far_below_both_ceilings_is_kernel_bound() -> None:
    figures = _recorded("cuda_compute_bound.json", 3)
    diagnosis = diagnose(_case(figures, 9.3e-3, flops_fraction=0.05, ceilings=H100_CEILINGS))
    assert diagnosis is not None and diagnosis.word == "kernel-bound"
    assert "below both ceilings" in diagnosis.line and "5% of the FLOP/s peak" in diagnosis.line


def test_bytes_near_the_bandwidth_are_memory_bound() -> None:
    # 2 GB allocated per step (written and read: 4 GB) + 1 GB of parameters read once in eval,
    # in a 2 ms step: 2.5 TB/s of a 3.35 TB/s ceiling = 75%.
    figures = ProfileFigures(steps=3, source="device", step_s=2e-3, busy_fraction=0.95,
                             kernels_per_step=12, median_kernel_s=1.5e-4,
                             allocated_bytes_per_step=2e9, parameter_bytes=10**9)
    assert bytes_moved_per_step(figures, "eval") == 5e9
    assert bytes_moved_per_step(figures, "train") == 9e9  # parameters moved five times
    diagnosis = diagnose(_case(figures, 2e-3, flops_fraction=0.1, ceilings=H100_CEILINGS, mode="eval"))
    assert diagnosis is not None and diagnosis.word == "memory-bound"
    assert diagnosis.figures["bandwidth_fraction"] == pytest.approx(2.5e12 / 3.35e12, rel=0.02)
    assert "2.5 TB/s of 3.35 TB/s" in diagnosis.line


def test_waiting_for_data_wins_over_everything() -> None:
    figures = _recorded("cuda_launch_bound.json", 4)
    diagnosis = diagnose(_case(figures, 430e-6, ceilings=H100_CEILINGS, input_wait=0.4))
    assert diagnosis is not None and diagnosis.word == "input-bound"
    assert "waiting for input 40% of the measured time" in diagnosis.line


def test_no_bandwidth_ceiling_is_said_not_guessed() -> None:
    figures = _recorded("cuda_compute_bound.json", 3)
    diagnosis = diagnose(_case(figures, 9.3e-3, flops_fraction=0.05, ceilings={"error": "x"}))
    assert diagnosis is not None and "bandwidth ceiling not measured" in diagnosis.line
    assert diagnosis.figures["bandwidth_fraction"] is None


def test_an_unprofiled_or_failed_case_has_no_diagnosis() -> None:
    assert diagnose(_case(None, 1e-3)) is None
    failed = _case(None, 1e-3)
    failed.profile = Profile(error="RuntimeError: profiler busy")
    assert diagnose(failed) is None


def test_a_malformed_stored_profile_is_refused_at_load_naming_the_field() -> None:
    # Checked when the file is read, so the diagnosis, the table and the report never see it.
    broken = _case(None, 1e-3).to_dict()
    broken["profile"] = {"figures": {"steps": 2, "source": "cpu", "step_s": 0.1, "busy_fraction": 0.5,
                                     "kernels_per_step": 3, "median_kernel_s": None,
                                     "top_ops": [["x"]]}}
    with pytest.raises(UsageError, match=r"'profile\.figures\.top_ops\[0\]' must be a list of 2"):
        CaseResult.from_dict(broken)


def test_a_device_without_profiler_activity_is_not_called_launch_bound() -> None:
    figures = ProfileFigures(steps=2, source="host-only", step_s=1e-3, busy_fraction=None,
                             kernels_per_step=300, median_kernel_s=2e-6)
    diagnosis = diagnose(_case(figures, 1e-3, flops_fraction=0.02, device="mps:0"))
    assert diagnosis is not None and diagnosis.word == "unknown"
    assert "offers no profiler activity" in diagnosis.line


def test_ceilings_come_from_the_roofline_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("accelbench.measure.roofline")
    module.device_roofline = lambda device, refresh=False: Roofline(  # type: ignore[attr-defined]
        matmul_flops={"float32": 8e10}, memory_bandwidth_bytes_per_s=2e10, launch_latency_s=3e-6)
    monkeypatch.setitem(sys.modules, "accelbench.measure.roofline", module)
    (cpu,) = DeviceSet.current().select("cpu")
    assert roofline_ceilings(cpu) == {"memory_bandwidth_bytes_per_s": 2e10, "launch_latency_s": 3e-6,
                                      "matmul_flops": {"float32": 8e10}}


def test_a_failing_roofline_leaves_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("accelbench.measure.roofline")

    def broken(device: Any, refresh: bool = False) -> Roofline:
        raise RuntimeError("no timer")

    module.device_roofline = broken  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "accelbench.measure.roofline", module)
    (cpu,) = DeviceSet.current().select("cpu")
    assert roofline_ceilings(cpu) == {"error": "RuntimeError: no timer"}
