"""Trackers around the measured code: memory, sensors and energy as composable context managers,
the timed loop entering them around the measured steps, and the runner going through them."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
import torch
from fakes import FakeAsyncAdapter

from accelbench.data.synthetic import EpochBatches
from accelbench.devices.base import Device
from accelbench.devices.cpu import CpuAdapter
from accelbench.engine.case import Case, skeleton_result
from accelbench.engine.measure_case import _measure
from accelbench.measure.data_parallel import CaseHooks
from accelbench.measure.loop.step_loop import NonFiniteError, StepLoop
from accelbench.measure.trackers.energy import EnergyMeter, EnergySource
from accelbench.measure.trackers.region import (
    EnergyTracker,
    MemoryTracker,
    SensorTracker,
    Tracker,
)
from accelbench.options import RunOptions, StopRule
from accelbench.workloads import get_workload_class

CPU = Device(CpuAdapter(), "cpu", 0)


def batches() -> EpochBatches:
    return EpochBatches([(torch.zeros(4, 2),)], 40, 4)


class Step:
    def __init__(self, nan_at: int | None = None) -> None:
        self.calls, self.nan_at = 0, nan_at

    def __call__(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        self.calls += 1
        return torch.tensor(float("nan") if self.calls == self.nan_at else 1.0)


class Recording(Tracker):
    """Appends "<name> start/stop" to a shared log; optionally fails in stop."""

    def __init__(self, name: str, log: list[str], fail: bool = False) -> None:
        super().__init__()
        self.name, self.log, self.fail = name, log, fail

    def start(self) -> None:
        self.log.append(f"{self.name} start")

    def stop(self) -> None:
        self.log.append(f"{self.name} stop")
        if self.fail:
            raise OSError("sensor went away")


class MemoryAdapter(FakeAsyncAdapter):
    """Counts resets and says when they happened (how many synchronisations had run)."""

    memory_source = "fake allocator"

    def __init__(self) -> None:
        super().__init__()
        self.resets: list[int] = []

    def reset_peak_memory(self, index: int) -> None:
        self.resets.append(self.syncs)
        self.peak = 0

    def peak_memory_bytes(self, index: int) -> int | None:
        return self.peak


def test_memory_tracker_resets_on_enter_and_reads_the_peak_on_exit() -> None:
    adapter = MemoryAdapter()
    adapter.peak = 10**9  # an earlier case's peak: must not reach this one
    tracker = MemoryTracker(Device(adapter, "fake", 0))
    with tracker:
        assert adapter.resets == [0] and adapter.peak == 0
        adapter.peak = 4096  # the region's allocations
    peak = tracker.result
    assert (peak.bytes, peak.source, peak.lower_bound, peak.error) == (4096, "fake allocator", False, "")
    assert adapter.resets == [0]  # exactly once


def test_trackers_compose_entered_in_order_and_exited_in_reverse() -> None:
    log: list[str] = []
    with ExitStack() as stack:
        for tracker in (Recording("sensors", log), Recording("energy", log)):
            stack.enter_context(tracker)
        log.append("steps")
    assert log == ["sensors start", "energy start", "steps", "energy stop", "sensors stop"]


def test_the_loop_enters_trackers_after_warm_up_in_order_and_exits_them_in_reverse() -> None:
    log: list[str] = []
    step = Step()

    class Steps(Recording):
        def start(self) -> None:
            log.append(f"start after {step.calls} steps")

    StepLoop(step, batches(), CPU, trackers=[Steps("a", log), Recording("b", log)]).run(
        StopRule("steps", 3), warmup_steps=2)
    assert log == ["start after 2 steps", "b start", "b stop", "a stop"]


def test_a_failing_tracker_keeps_the_timing_and_records_its_error() -> None:
    log: list[str] = []
    broken, other = Recording("broken", log, fail=True), Recording("other", log)
    loop = StepLoop(Step(), batches(), CPU, trackers=[other, broken])
    measured = loop.run(StopRule("steps", 5), warmup_steps=1)
    assert measured.measured_steps == 5 and len(measured.step_times) == 5
    assert broken.error == "OSError: sensor went away" and not other.error
    assert log[-2:] == ["broken stop", "other stop"]  # the next tracker still exited


def test_trackers_are_exited_when_a_step_fails() -> None:
    log: list[str] = []
    with pytest.raises(NonFiniteError):
        StepLoop(Step(nan_at=3), batches(), CPU, trackers=[Recording("energy", log)]).run(
            StopRule("steps", 5), warmup_steps=1)
    assert log == ["energy start", "energy stop"]  # a sampler thread or child would be stopped


def test_sensor_tracker_reads_just_before_and_right_after() -> None:
    readings = iter([{"cpu_mhz": 3000.0}, {"cpu_mhz": 2400.0}])
    tracker = SensorTracker(CPU, lambda: next(readings))
    with tracker:
        pass
    assert tracker.result.to_dict() == {"start": {"cpu_mhz": 3000.0}, "end": {"cpu_mhz": 2400.0}}
    failing = SensorTracker(CPU, lambda: 1 / 0)
    with failing:
        pass
    assert failing.result.to_dict()["error"].startswith("ZeroDivisionError")


class CountingSource(EnergySource):
    """Reports 2 J per stop() over a window the loop must keep open for ``min_seconds``."""

    name, method, resolution = "fake", "counter difference", "1 J"

    def __init__(self, min_seconds: float = 0.0, joules: float = 6.0) -> None:
        self.min_seconds, self.joules = min_seconds, joules
        self.starts = 0

    def available(self) -> tuple[bool, str]:
        return True, ""

    def start(self) -> None:
        self.starts += 1

    def stop(self) -> float:
        return self.joules


def test_energy_tracker_gives_the_meters_reading_and_its_minimum_window() -> None:
    source = CountingSource(joules=6.0)
    energy = EnergyTracker(EnergyMeter([source]))
    energy.prepare()
    loop = StepLoop(Step(), batches(), CPU, trackers=[energy])
    loop.run(StopRule("steps", 3), warmup_steps=1)
    figures = energy.result.figures(loop.window_steps, steps_per_epoch=10, batch_size=4)
    assert source.starts == 1 and figures["joules_per_step"] == 2.0 and figures["source"] == "fake"
    # A counter that needs a longer window makes the loop hold it open (steps outside the samples).
    slow = EnergyTracker(EnergyMeter([CountingSource(min_seconds=0.05)]))
    assert slow.min_window_s == 0.05
    # Never 0 J: a counter that did not move is a reason, not a figure.
    still = EnergyTracker(EnergyMeter([CountingSource(joules=0.0)]))
    with still:
        pass
    assert still.result.joules is None and "did not change" in still.result.reason


def test_the_runner_measures_through_the_trackers_and_resets_memory_at_the_start_and_warm_ups_end() -> None:
    """The peak is reset before any work, and again where the warm-up ends (issue 26, item 17),
    after reading the set-up's peak there."""
    adapter = MemoryAdapter()
    device = Device(adapter, "fake", 0)
    options = RunOptions(workloads=("mnist",), device="fake:0", modes=("train",), size="tiny",
                         stop=StopRule("steps", 3), warmup_steps=2, isolation="none")
    adapter.peak = 10**9  # left over from before the case
    original = adapter.peak_memory_bytes
    reads: list[int] = []

    def peak_memory_bytes(index: int) -> int | None:
        reads.append(adapter.syncs)
        return 777 if adapter.resets else original(index)

    adapter.peak_memory_bytes = peak_memory_bytes  # type: ignore[method-assign]
    case = Case(workload="mnist", mode="train", device=device, batch_size=8)
    result = skeleton_result(case, options)
    _measure(case, get_workload_class("mnist")("tiny"), options, result, None, CaseHooks())
    assert adapter.resets[0] == 0  # before any work (no synchronisation yet)
    # The set-up's peak is read where the warm-up ended, the counter reset right after it; the
    # steady state's is read after the measured steps.
    assert len(adapter.resets) == 2 and len(reads) == 2
    assert 2 <= reads[0] == adapter.resets[1] < reads[1]
    assert result.peak_memory_bytes == result.setup_peak_memory_bytes == 777
    assert result.memory_source == "fake allocator"
    assert result.memory_is_lower_bound is False
    assert result.sensors is not None and result.sensors.start is not None
    assert result.sensors.end is not None
    assert result.energy is not None and result.energy.joules is None  # no energy source named
    assert "no known energy sensor" in result.energy.reason


# --- the --data synthetic-device pool is set aside from the peak (issue 19, item 10) -------------
class CountedAllocator(FakeAsyncAdapter):
    """A counted peak as CUDA's allocator keeps one: live bytes go up and down, the peak is their
    maximum since the last reset, and a reset starts it at what is live."""

    memory_source = "fake allocator peak"

    def __init__(self) -> None:
        super().__init__()
        self.live = 0

    def allocate(self, nbytes: int) -> None:
        self.live += nbytes
        self.peak = max(self.peak, self.live)

    def free(self, nbytes: int) -> None:
        self.live -= nbytes

    def reset_peak_memory(self, index: int) -> None:
        self.peak = self.live


MB = 2**20


@pytest.mark.parametrize("build_temporary", [0, 1500 * MB])
def test_a_pool_held_for_the_whole_case_is_set_aside_wherever_the_peak_fell(
        build_temporary: int) -> None:
    """Model 100 MB, a 600 MB batch pool on the device, 300 MB of activations per step: both data
    modes report the model's 400 MB. A model build that briefly needed 1.5 GB (before the pool
    existed) still reports that 1.5 GB: the peak read before the pool is kept."""
    peaks = {}
    for mode in ("synthetic", "synthetic-device"):
        allocator = CountedAllocator()
        tracker = MemoryTracker(Device(allocator, "fake", 0))
        with tracker:
            allocator.allocate(build_temporary)
            allocator.free(build_temporary)
            allocator.allocate(100 * MB)  # the model
            tracker.note_peak()
            pool = 600 * MB if mode == "synthetic-device" else 0
            allocator.allocate(pool)
            tracker.set_aside(pool, "the device-resident batch pool")
            for _ in range(3):  # steps
                allocator.allocate(300 * MB)
                allocator.free(300 * MB)
        peaks[mode] = tracker.result
    expected = max(400 * MB, build_temporary)
    assert peaks["synthetic"].bytes == peaks["synthetic-device"].bytes == expected
    assert peaks["synthetic"].source == "fake allocator peak"
    assert peaks["synthetic-device"].set_aside_bytes == 600 * MB
    assert peaks["synthetic-device"].source == ("fake allocator peak; less 600.0 MiB of the "
                                                "device-resident batch pool, held for the whole case")


def test_the_runner_sets_the_device_resident_pool_aside_and_labels_it() -> None:
    """Through _measure on a fake accelerator: the peak is read just before the pool is placed,
    the pool's own bytes (mnist tiny, 4 batches of 8: images and labels) come off the end peak,
    and the source says so; --data synthetic takes nothing off."""
    pool_bytes = 4 * (8 * 1 * 28 * 28 * 4 + 8 * 8)
    model, activations = 5 * MB, 3 * MB
    results = {}
    for mode in ("synthetic", "synthetic-device"):
        adapter = MemoryAdapter()
        end = model + activations + (pool_bytes if mode == "synthetic-device" else 0)

        def counter(index: int, adapter: MemoryAdapter = adapter, end: int = end) -> int:
            # Before any step ran (no synchronisation yet) only the model is on the device.
            return model if adapter.syncs == 0 else end

        adapter.peak_memory_bytes = counter  # type: ignore[method-assign]
        device = Device(adapter, "fake", 0)
        options = RunOptions(workloads=("mnist",), device="fake:0", modes=("train",), size="tiny",
                             stop=StopRule("steps", 2), warmup_steps=1, isolation="none", data=mode)
        case = Case(workload="mnist", mode="train", device=device, batch_size=8)
        result = skeleton_result(case, options)
        _measure(case, get_workload_class("mnist")("tiny"), options, result, None, CaseHooks())
        results[mode] = result
    assert results["synthetic"].peak_memory_bytes == model + activations
    assert results["synthetic-device"].peak_memory_bytes == model + activations
    assert results["synthetic"].memory_source == "fake allocator"
    assert results["synthetic-device"].memory_source == (
        "fake allocator; less 98.2 KiB of the device-resident batch pool (--data synthetic-device), "
        "held for the whole case")


# --- the set-up's peak is kept apart from the steady state's (issue 26, item 17) -----------------
@pytest.mark.parametrize("pool", [0, 600 * MB])
def test_the_peak_is_the_steady_states_with_the_set_ups_beside_it(pool: int) -> None:
    """Item 17: with cudnn.benchmark the warm-up tries each convolution algorithm with its own
    workspace (an H200 saw ResNet-50 fp32 b128 at 15.8 GiB with it, 11.1 GiB without): the
    tracker spanned the warm-up, so that workspace was the case's peak. Model 100 MB, a 2 GB
    workspace in the warm-up, 300 MB of activations a step: the peak is 400 MB, the set-up's
    2.1 GB; a device-resident pool is set aside from both."""
    allocator = CountedAllocator()
    tracker = MemoryTracker(Device(allocator, "fake", 0))
    with tracker:
        allocator.allocate(100 * MB)  # the model
        tracker.note_peak()
        allocator.allocate(pool)
        tracker.set_aside(pool, "the pool")
        allocator.allocate(2048 * MB)  # warm-up: the autotuner's workspace, freed after it
        allocator.free(2048 * MB)
        tracker.steady_state()
        for _ in range(3):
            allocator.allocate(300 * MB)
            allocator.free(300 * MB)
    peak = tracker.result
    assert (peak.bytes, peak.setup_bytes) == (400 * MB, 2148 * MB)
    assert "set-up" not in peak.source


def test_a_device_whose_peak_cannot_be_reset_reports_the_whole_case_and_says_so() -> None:
    class Unresettable(CountedAllocator):
        def reset_peak_memory(self, index: int) -> bool:
            return False  # macOS's ru_maxrss, a back end without torch.accelerator's reset

    allocator = Unresettable()
    tracker = MemoryTracker(Device(allocator, "fake", 0))
    with tracker:
        allocator.allocate(1024 * MB)
        allocator.free(1024 * MB)
        tracker.steady_state()
        allocator.allocate(10 * MB)
    peak = tracker.result
    assert (peak.bytes, peak.setup_bytes) == (1024 * MB, None)
    assert peak.source.endswith("set-up included (this device's peak counter cannot be reset)")


def test_every_device_kind_resets_its_peak_and_says_whether_it_could(tmp_path) -> None:
    """The reset each adapter makes where the steady state begins: True where the counter
    restarted, False where the figure keeps counting from before."""
    from fakes import fake_torch

    from accelbench.devices.cpu import CpuAdapter
    from accelbench.devices.generic import GenericAcceleratorAdapter

    assert CpuAdapter(tmp_path / "no-proc").reset_peak_memory(0) is False  # no clear_refs (macOS)
    (tmp_path / "proc").mkdir()
    assert CpuAdapter(tmp_path / "proc").reset_peak_memory(0) is True
    torch_module = fake_torch()
    torch_module.accelerator = type("Accelerator", (), {})()
    assert GenericAcceleratorAdapter("hpu", torch_module).reset_peak_memory(0) is False
    calls: list[int] = []
    torch_module.accelerator.reset_peak_memory_stats = calls.append
    assert GenericAcceleratorAdapter("hpu", torch_module).reset_peak_memory(0) is True
    assert calls == [0]


def test_the_table_shows_the_steady_peak_with_the_set_ups_beside_it_where_higher() -> None:
    """Item 17: "peak mem" is the steady state's, the set-up's follows where it was higher; the
    result file keeps both, and one written before setup_peak_memory_bytes existed loads."""
    from accelbench.render.table import memory_cell
    from accelbench.results import CaseResult, RunRecord

    gib = 2**30
    case = CaseResult(workload="resnet50", mode="train", device="cuda:0", batch_size=128, status="ok",
                      peak_memory_bytes=int(11.1 * gib), setup_peak_memory_bytes=int(15.8 * gib),
                      memory_source="CUDA caching allocator peak (torch.cuda.max_memory_allocated)")
    assert memory_cell(case) == "11.1 GiB allocator (set-up 15.8 GiB)"
    case.setup_peak_memory_bytes = case.peak_memory_bytes
    assert memory_cell(case) == "11.1 GiB allocator"
    case.setup_peak_memory_bytes = None
    assert memory_cell(case) == "11.1 GiB allocator"
    case.setup_peak_memory_bytes = 5 * gib
    record = RunRecord(run_id="r", created_at="2026-11-26T00:00:00+0000", accelbench_version="0",
                       cases=[case]).to_dict()
    assert record["cases"][0]["setup_peak_memory_bytes"] == 5 * gib
    del record["cases"][0]["setup_peak_memory_bytes"]
    (old,) = RunRecord.from_dict(record).cases
    assert old.setup_peak_memory_bytes is None and old.peak_memory_bytes == int(11.1 * gib)
