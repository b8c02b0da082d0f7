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
from accelbench.measure.trackers.profile import analyse_trace, roofline_ceilings
from accelbench.render.diagnosis import bytes_moved_per_step, diagnose
from accelbench.results import CaseResult, Ceilings, Flops, Profile, ProfileFigures

PROFILES = Path(__file__).parents[1] / "data" / "profiles"
H100_CEILINGS = {"memory_bandwidth_bytes_per_s": 3.35e12, "launch_latency_s": 4e-6,
                 "matmul_flops": {"float16": 7.0e14, "float32": 5.0e13}}


@dataclass(frozen=True)
class Roofline:
    """The interface ``accelbench.measure.ceilings.roofline.device_roofline`` returns (built elsewhere)."""

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
                          profile, Ceilings(**(ceilings or {}))),
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
    module = types.ModuleType("accelbench.measure.ceilings.roofline")
    module.device_roofline = lambda device, refresh=False: Roofline(  # type: ignore[attr-defined]
        matmul_flops={"float32": 8e10}, memory_bandwidth_bytes_per_s=2e10, launch_latency_s=3e-6)
    monkeypatch.setitem(sys.modules, "accelbench.measure.ceilings.roofline", module)
    (cpu,) = DeviceSet.current().select("cpu")
    assert roofline_ceilings(cpu) == {"memory_bandwidth_bytes_per_s": 2e10, "launch_latency_s": 3e-6,
                                      "matmul_flops": {"float32": 8e10}}


def test_a_failing_roofline_leaves_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("accelbench.measure.ceilings.roofline")

    def broken(device: Any, refresh: bool = False) -> Roofline:
        raise RuntimeError("no timer")

    module.device_roofline = broken  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "accelbench.measure.ceilings.roofline", module)
    (cpu,) = DeviceSet.current().select("cpu")
    assert roofline_ceilings(cpu) == {"error": "RuntimeError: no timer"}


# --- the profiler's own host overhead (issue 19, item 9) -----------------------------------------
def plant_host_overhead(trace: dict[str, Any], per_step_us: float) -> dict[str, Any]:
    """The trace as a profiler that slows the host by ``per_step_us`` per step would record it:
    each step's host work starts that much later than the last one's, so its kernels, launched
    later, start later too; the device, fed by a slowed host, idles in between. Kernel durations
    stay what they were (the device's work does not change)."""
    trace = json.loads(json.dumps(trace))
    events = trace["traceEvents"]
    marks = sorted((e for e in events if e.get("cat") == "user_annotation"), key=lambda e: e["ts"])
    bounds = [mark["ts"] for mark in marks[1:]] + [float("inf")]

    def step_of(ts: float) -> int:
        return next(i for i, bound in enumerate(bounds) if ts < bound)

    launched = {e["args"]["correlation"]: step_of(e["ts"]) for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    for event in events:
        if "ts" not in event or event.get("ph") == "M":
            continue
        if event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            step = launched[event["args"]["correlation"]]
        elif event.get("ph") == "f":
            step = launched[event["id"]]
        else:
            step = step_of(event["ts"])
        if event.get("cat") == "user_annotation":
            event["ts"] += step * per_step_us
            event["dur"] += per_step_us
        else:
            event["ts"] += (step + 1) * per_step_us
    return trace


def test_profiler_overhead_does_not_make_a_device_bound_case_launch_bound() -> None:
    """The compute-bound GEMM trace with 20 ms of profiler host overhead planted per step: the
    profiled window shows the device 31% busy (below the launch-bound line), but the case's own
    measured step, 9.3 ms, is what the busy time is judged against: 99% busy, compute-bound."""
    trace = json.loads((PROFILES / "cuda_compute_bound.json").read_text())
    planted = analyse_trace(plant_host_overhead(trace, 20_000), steps=3, device_is_cpu=False)
    honest = _recorded("cuda_compute_bound.json", 3)
    assert planted.busy_fraction * planted.step_s == pytest.approx(honest.busy_fraction * honest.step_s)
    assert planted.busy_fraction == pytest.approx(27600 / (27850 + 3 * 20_000))  # 31%
    assert planted.busy_fraction < 0.5  # what the verdict used to be read from

    diagnosis = diagnose(_case(planted, 9.3e-3, flops_fraction=0.72, ceilings=H100_CEILINGS))
    assert diagnosis is not None and diagnosis.word == "compute-bound", diagnosis.line
    assert diagnosis.figures["busy_fraction"] == pytest.approx(27600 / 3 / 9.3e3)
    assert diagnosis.figures["profiled_busy_fraction"] == planted.busy_fraction
    assert "device busy 99% of the step (measured 9.3 ms" in diagnosis.line
    assert "31% busy" in diagnosis.line
    slow = diagnose(_case(planted, 9.3e-3, flops_fraction=0.05, ceilings=H100_CEILINGS))
    assert slow is not None and slow.word == "kernel-bound"


def test_a_really_idle_device_stays_launch_bound_however_slow_the_measured_step() -> None:
    """Judging against the measured step can raise the busy share back, never lower it: a launch-
    bound trace measured slower than it was profiled keeps its profiled share."""
    figures = _recorded("cuda_launch_bound.json", 4)
    for measured in (430e-6, 2e-3):
        diagnosis = diagnose(_case(figures, measured, flops_fraction=0.01, ceilings=H100_CEILINGS))
        assert diagnosis is not None and diagnosis.word == "launch-bound"
        assert diagnosis.figures["busy_fraction"] == pytest.approx(figures.busy_fraction, rel=0.01)


# --- issue 19: on MPS the input wait is the host's fetch time, an upper bound -------------------------
def _mps_input_wait_method() -> str:
    """The label the timed loop records on a device whose events are not safe around every step
    (MPS): the host's fetch time, an upper bound."""
    from fakes import FakeAsyncAdapter

    from accelbench.devices import Device
    from accelbench.measure.loop.input_wait import InputWait

    adapter = FakeAsyncAdapter()
    adapter.step_events_safe = False
    return InputWait(Device(adapter, "mps")).method


def test_an_upper_bound_on_the_input_wait_alone_never_calls_a_case_input_bound() -> None:
    # A device-bound MPS case whose host spent 40% of the time fetching while the device worked
    # through its queue was called input-bound from the fetch time alone.
    figures = _recorded("cuda_compute_bound.json", 3)
    bound = _case(figures, 9.3e-3, flops_fraction=0.72, ceilings=H100_CEILINGS, input_wait=0.4,
                  device="mps:0")
    bound.input_wait_method = _mps_input_wait_method()
    assert "upper bound" in bound.input_wait_method
    diagnosis = diagnose(bound)
    assert diagnosis is not None and diagnosis.word == "compute-bound"
    assert diagnosis.line.endswith("; input wait ≤ 40% of the measured time (host fetch time; the "
                                   "device may have been busy meanwhile)")
    assert diagnosis.figures["input_wait_upper_bound"] is True
    assert not bound.input_bound() and bound.to_dict()["derived"]["input_bound"] is False
    # an event that failed during the case leaves the host fetch time too: the same
    bound.input_wait_method = "host fetch time (upper bound: a timing event failed: RuntimeError: x)"
    assert diagnose(bound).word == "compute-bound" and not bound.input_bound()


@pytest.mark.parametrize("method", ["host fetch time (synchronous device)", "device idle (timing events)",
                                    ""], ids=["cpu", "events", "older result"])
def test_an_exact_input_wait_still_calls_a_case_input_bound(method: str) -> None:
    figures = _recorded("cuda_compute_bound.json", 3)
    exact = _case(figures, 9.3e-3, flops_fraction=0.72, ceilings=H100_CEILINGS, input_wait=0.4)
    exact.input_wait_method = method
    diagnosis = diagnose(exact)
    assert diagnosis is not None and diagnosis.word == "input-bound" and exact.input_bound()
    assert "≤" not in diagnosis.line


def test_a_small_upper_bound_adds_nothing_to_the_line() -> None:
    figures = _recorded("cuda_compute_bound.json", 3)
    small = _case(figures, 9.3e-3, flops_fraction=0.72, ceilings=H100_CEILINGS, input_wait=0.1,
                  device="mps:0")
    small.input_wait_method = _mps_input_wait_method()
    diagnosis = diagnose(small)
    assert diagnosis is not None and "input wait" not in diagnosis.line
