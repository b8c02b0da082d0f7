"""--profile: a real profile of a tiny MNIST case on the CPU, and recorded CUDA traces analysed by
the same function the live path runs on the trace it exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelbench.devices import DeviceSet
from accelbench.engine.case import plan
from accelbench.engine.measure_case import run_case
from accelbench.measure.trackers import profile as profile_module
from accelbench.measure.trackers.profile import STEP_MARK, analyse_trace, profiler_activities
from accelbench.options import RunOptions, StopRule
from accelbench.render.diagnosis import diagnose
from accelbench.results import Ceilings

PROFILES = Path(__file__).parents[1] / "data" / "profiles"
#: pytorch/examples' MNIST network: conv 1->32, conv 32->64, fc 9216->128, fc 128->10 (float32).
MNIST_PARAMETER_BYTES = 4 * 1_199_882


def _trace(name: str) -> dict[str, Any]:
    return json.loads((PROFILES / name).read_text())


PROFILED_STEPS = 2
CEILINGS = {"memory_bandwidth_bytes_per_s": 2e10, "launch_latency_s": 5e-6}


@pytest.fixture(scope="module")
def profiled_mnist() -> Any:
    """One real tiny MNIST training case on the CPU, profiled through the runner."""
    options = RunOptions(workloads=("mnist",), device="cpu", modes=("train",), size="tiny",
                         stop=StopRule("steps", 2), warmup_steps=0, isolation="none", profile=True,
                         batch_size=4)
    (case,) = plan(options, DeviceSet.current())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profile_module, "PROFILE_STEPS", PROFILED_STEPS)  # fewer, for speed
        # The roofline is measured (and tested) by its own module; a fixed one keeps this fast.
        patch.setattr(profile_module, "roofline_ceilings", lambda device: dict(CEILINGS))
        return run_case(case, options)


def test_a_real_cpu_profile_has_figures_that_hang_together(profiled_mnist: Any) -> None:
    result = profiled_mnist
    assert result.ok, result.error
    profile = result.profile.figures
    assert profile.source == "cpu" and profile.steps == PROFILED_STEPS
    assert 0 < profile.busy_fraction <= 1
    # A training step runs forward, backward and Adadelta over 8 parameter tensors: dozens of ops.
    assert profile.kernels_per_step > 30
    assert 0 < profile.median_kernel_s < profile.step_s
    names = [name for name, _ in profile.top_ops]
    assert all(name.startswith("aten::") for name in names)
    assert any("conv" in name for name in names), names  # two conv layers dominate the step
    assert sum(seconds for _, seconds in profile.top_ops) <= profile.step_s
    assert profile.parameter_bytes == MNIST_PARAMETER_BYTES
    assert profile.allocated_bytes_per_step > 0  # activations and gradients are allocated
    assert result.profile.ceilings == Ceilings(**CEILINGS)


def test_a_profiled_mnist_case_gets_a_diagnosis_backed_by_its_figures(profiled_mnist: Any) -> None:
    diagnosis = diagnose(profiled_mnist)
    assert diagnosis is not None
    assert diagnosis.word in ("launch-bound", "compute-bound", "memory-bound", "input-bound",
                              "kernel-bound")
    profile = profiled_mnist.profile.figures
    # Busy time per step over the measured step where that is the shorter (profiler overhead).
    step = profiled_mnist.summary().median
    busy = profile.busy_fraction * profile.step_s / min(step, profile.step_s)
    assert diagnosis.figures["busy_fraction"] == pytest.approx(min(busy, 1.0))
    assert diagnosis.figures["profiled_busy_fraction"] == profile.busy_fraction
    assert diagnosis.figures["kernels_per_step"] == profile.kernels_per_step
    assert diagnosis.figures["flops_fraction"] == profiled_mnist.flops.fraction_of_peak
    assert f"busy {diagnosis.figures['busy_fraction'] * 100:.0f}%" in diagnosis.line
    # Bytes moved: 2 x allocated + 5 x parameters (training), per measured median step.
    moved = 2 * profile.allocated_bytes_per_step + 5 * MNIST_PARAMETER_BYTES
    assert diagnosis.figures["bandwidth_fraction"] == pytest.approx(moved / step / 2e10)
    assert f"{moved / step / 2e10 * 100:.0f}% of the bandwidth" in diagnosis.line
    assert f"{profile.kernels_per_step:.0f} ops/step" in diagnosis.line or \
        diagnosis.word in ("input-bound", "compute-bound", "memory-bound")


def test_profiling_happens_after_the_measured_steps(profiled_mnist: Any) -> None:
    assert profiled_mnist.measured_steps == 2  # the profiled steps are extra, not measured ones


def test_the_cpu_gets_only_the_cpu_activity() -> None:
    from torch.profiler import ProfilerActivity

    (cpu,) = DeviceSet.current().select("cpu")
    assert profiler_activities(cpu) == [ProfilerActivity.CPU]


def test_recorded_launch_bound_cuda_trace() -> None:
    figures = analyse_trace(_trace("cuda_launch_bound.json"), steps=4, device_is_cpu=False,
                            parameter_bytes=1000)
    assert figures.source == "device"
    assert figures.step_s == pytest.approx(1715e-6 / 4)
    assert figures.busy_fraction == pytest.approx(344 / 1715)
    assert figures.kernels_per_step == 20  # the H2D copy is device time but not a kernel
    assert figures.median_kernel_s == pytest.approx(4e-6)
    names = dict(figures.top_ops)
    assert names["gemv2T_kernel_val"] == pytest.approx(40e-6)
    assert names["at::native::vectorized_elementwise_kernel"] == pytest.approx(40e-6)
    assert names["Memcpy HtoD"] == pytest.approx(6e-6)
    # Device allocations only (the pinned host staging buffer is CPU memory; frees are negative).
    assert figures.allocated_bytes_per_step == 802816 + 20 * 65536


def test_recorded_compute_bound_cuda_trace() -> None:
    figures = analyse_trace(_trace("cuda_compute_bound.json"), steps=3, device_is_cpu=False)
    assert figures.busy_fraction == pytest.approx(27600 / 27850)
    assert figures.kernels_per_step == 3
    assert figures.median_kernel_s == pytest.approx(4.5e-3)
    assert figures.top_ops[0][0].startswith("sm90_xmma_gemm_f16f16")
    assert figures.top_ops[0][1] == pytest.approx(9e-3)


def test_an_accelerator_without_profiler_activity_has_no_busy_share() -> None:
    """MPS offers no ProfilerActivity: a trace without device events gives host figures only,
    never a CPU busy share passed off as the device's."""
    trace = _trace("cuda_launch_bound.json")
    trace["traceEvents"] = [e for e in trace["traceEvents"]
                            if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")]
    figures = analyse_trace(trace, steps=4, device_is_cpu=False)
    assert figures.source == "host-only" and figures.busy_fraction is None
    assert figures.kernels_per_step == 21  # 20 launching ops and the copy, as host ops


def test_cpu_ops_self_time_and_leaves_come_from_their_nesting() -> None:
    def op(name: str, ts: float, dur: float) -> dict[str, Any]:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}

    trace = {"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": STEP_MARK, "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        op("aten::linear", 10, 50), op("aten::t", 12, 3), op("aten::addmm", 20, 30),
        op("aten::relu", 70, 10)]}
    figures = analyse_trace(trace, steps=1, device_is_cpu=True)
    assert figures.kernels_per_step == 3  # t, addmm, relu: linear contains other ops
    assert dict(figures.top_ops) == pytest.approx({"aten::addmm": 30e-6, "aten::linear": 17e-6,
                                                   "aten::relu": 10e-6, "aten::t": 3e-6})
    assert figures.busy_fraction == pytest.approx(0.6)  # linear 10..60 and relu 70..80


def test_a_trace_without_step_marks_is_an_error() -> None:
    with pytest.raises(ValueError, match="step marks"):
        analyse_trace({"traceEvents": []}, steps=1, device_is_cpu=True)


@pytest.mark.parametrize("name", ["cuda_launch_bound.json", "cuda_compute_bound.json"])
def test_recorded_traces_pass_torchs_own_trace_validator(name: str) -> None:
    """torch's validator (rules from production traces: a kernel starts after its launch, ...)
    accepts the fixtures, so they are shaped like what torch.profiler exports for CUDA."""
    validator = pytest.importorskip("torch.profiler._trace_validator",
                                    reason="this torch has no trace validator")
    passed, violations = validator.validate_trace(str(PROFILES / name))
    assert passed, [str(v) for v in violations]


def test_allocations_are_taken_in_a_separate_pass_from_the_timed_one(monkeypatch) -> None:
    """profile_memory adds a record per allocation and free to every step: the timed pass runs
    without it, and a second pass with it gives the allocations only (issue 19, item 9)."""
    import torch

    traces: list[tuple[bool, dict[str, Any]]] = []
    real = profile_module.profiled_trace

    def spy(*args: Any, memory: bool, **kwargs: Any) -> dict[str, Any]:
        trace = real(*args, memory=memory, **kwargs)
        traces.append((memory, trace))
        return trace

    monkeypatch.setattr(profile_module, "profiled_trace", spy)
    (cpu,) = DeviceSet.current().select("cpu")
    ran: list[int] = []

    def step(batch: torch.Tensor) -> torch.Tensor:
        ran.append(1)
        return (batch @ batch).relu().sum()

    figures = profile_module.profile_steps(step, lambda: torch.randn(64, 64), cpu, steps=2)
    assert [memory for memory, _ in traces] == [False, True] and len(ran) == 4

    def memory_records(trace: dict[str, Any]) -> int:
        return sum(e.get("name") == "[memory]" for e in trace["traceEvents"])

    assert memory_records(traces[0][1]) == 0  # the timed pass carries no allocation records
    assert memory_records(traces[1][1]) > 0
    assert figures.allocated_bytes_per_step == profile_module.allocated_per_step(
        traces[1][1], 2, device_is_cpu=True) > 0
    assert figures.steps == 2 and figures.source == "cpu" and figures.kernels_per_step > 0
