"""The timed loop: stop rules, warm-up exclusion, windows on asynchronous devices, NaN detection."""

from __future__ import annotations

import math
import time

import pytest
import torch
from fakes import FakeAsyncAdapter

from accelbench.data.synthetic import EpochBatches
from accelbench.devices.base import Device
from accelbench.devices.cpu import CpuAdapter
from accelbench.errors import UsageError
from accelbench.measure.loop.step_loop import NonFiniteError, StepLoop
from accelbench.measure.loop.stop import MIN_SAMPLES, StopRule
from accelbench.measure.trackers.region import SensorTracker, Tracker


def epoch(dataset_size: int = 10, batch: int = 4) -> EpochBatches:
    return EpochBatches([(torch.zeros(batch, 2),)], dataset_size, batch)


class CountingStep:
    def __init__(self, sleep: float = 0.0, nan_at: int | None = None) -> None:
        self.calls = 0
        self.sizes: list[int] = []
        self.sleep = sleep
        self.nan_at = nan_at

    def __call__(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        self.calls += 1
        self.sizes.append(len(batch[0]))
        if self.sleep:
            time.sleep(self.sleep)
        return torch.tensor(float("nan") if self.calls == self.nan_at else 1.0)


CPU = Device(CpuAdapter(), "cpu", 0)


class SlowEpoch:
    """A loader that takes 10 ms per batch."""

    def __iter__(self):
        for _ in range(100):
            time.sleep(0.01)
            yield (torch.zeros(2, 2),)


def test_steps_rule_measures_exactly_n_steps_after_warmup() -> None:
    step = CountingStep()
    measured = StepLoop(step, epoch(), CPU).run(StopRule("steps", 7), warmup_steps=2)
    assert step.calls == 9
    assert measured.warmup_steps == 2 and measured.measured_steps == 7
    assert len(measured.step_times) == 7
    assert measured.time_to_first_step_s is not None and measured.warmup_time_s is not None


def test_epochs_rule_runs_whole_epochs_with_a_partial_last_batch() -> None:
    step = CountingStep()
    measured = StepLoop(step, epoch(10, 4), CPU).run(StopRule("epochs", 2), warmup_steps=1)
    assert len(measured.epoch_times) == 2
    # Warm-up takes one batch, then each epoch is 4 + 4 + 2 samples.
    assert step.sizes[1:] == [4, 4, 2, 4, 4, 2]
    assert measured.measured_steps == 6
    assert all(e >= 0 for e in measured.epoch_times)


def test_time_budget_rule_stops_after_the_budget_with_minimum_samples() -> None:
    step = CountingStep(sleep=0.01)
    measured = StepLoop(step, epoch(), CPU).run(StopRule("time", 0.1), warmup_steps=0)
    assert measured.measured_time_s >= 0.1
    assert len(measured.step_times) >= MIN_SAMPLES
    assert measured.measured_time_s < 1.0
    assert all(t >= 0.009 for t in measured.step_times)


def test_budget_shorter_than_a_step_still_takes_minimum_samples() -> None:
    step = CountingStep(sleep=0.02)
    measured = StepLoop(step, epoch(), CPU).run(StopRule("time", 0.001), warmup_steps=0)
    assert len(measured.step_times) == MIN_SAMPLES


def test_warmup_steps_are_excluded_from_samples() -> None:
    slow_first = CountingStep()
    original = slow_first.__call__

    def step(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if slow_first.calls == 0:
            time.sleep(0.05)
        return original(batch)

    measured = StepLoop(step, epoch(), CPU).run(StopRule("steps", 5), warmup_steps=1)
    assert measured.time_to_first_step_s >= 0.05
    assert max(measured.step_times) < 0.05


def test_async_device_short_steps_are_timed_in_windows_with_one_sync_each() -> None:
    adapter = FakeAsyncAdapter()
    device = Device(adapter, "fake", 0)
    step = CountingStep()
    syncs_at_start: list[int] = []

    class Loop(StepLoop):
        def _begin_measuring(self, window) -> None:
            syncs_at_start.append(adapter.syncs)
            super()._begin_measuring(window)

    measured = Loop(step, epoch(10**6, 4), device).run(StopRule("steps", 100), warmup_steps=2)
    k = measured.steps_per_sample
    assert k > 1  # microsecond steps are far below the 5 ms window
    assert measured.measured_steps == 100
    assert len(measured.step_times) == -(-100 // k)
    # One sync per measured window, none between its steps.
    assert adapter.syncs - syncs_at_start[0] == len(measured.step_times)


def test_cpu_never_windows() -> None:
    measured = StepLoop(CountingStep(), epoch(), CPU).run(StopRule("steps", 20), warmup_steps=2)
    assert measured.steps_per_sample == 1 and len(measured.step_times) == 20


def test_non_finite_output_stops_with_the_step_number() -> None:
    with pytest.raises(NonFiniteError) as caught:
        StepLoop(CountingStep(nan_at=5), epoch(), CPU).run(StopRule("steps", 10), warmup_steps=1)
    assert caught.value.step == 5


def test_input_wait_is_measured_separately() -> None:
    measured = StepLoop(CountingStep(), SlowEpoch(), CPU).run(StopRule("steps", 5), warmup_steps=1)
    assert measured.input_wait_s >= 0.05
    assert measured.input_wait_s <= measured.measured_time_s


def test_epoch_end_work_is_timed_and_its_metrics_kept() -> None:
    def knn() -> dict[str, float]:
        time.sleep(0.03)
        return {"knn_top1": 0.5}

    measured = StepLoop(CountingStep(), epoch(), CPU, epoch_end=knn).run(StopRule("steps", 3), 0)
    assert measured.epoch_end_s >= 0.03 and measured.metrics == {"knn_top1": 0.5}
    per_epoch = StepLoop(CountingStep(), epoch(), CPU, epoch_end=knn).run(StopRule("epochs", 1), 0)
    assert per_epoch.epoch_times[0] >= 0.03


@pytest.mark.parametrize("kind,value", [("steps", 0), ("time", -1), ("epochs", 1.5), ("bogus", 1)])
def test_bad_stop_rules_are_usage_errors(kind: str, value: float) -> None:
    with pytest.raises(UsageError):
        StopRule(kind, value)


def test_slow_loader_marks_the_case_input_bound() -> None:
    from accelbench.results import CaseResult

    measured = StepLoop(CountingStep(), SlowEpoch(), CPU).run(StopRule("steps", 5), warmup_steps=1)
    case = CaseResult(workload="w", mode="train", device="cpu", batch_size=2, **{
        k: v for k, v in vars(measured).items()})
    assert case.input_bound() and case.to_dict()["derived"]["input_bound"] is True
    fast = StepLoop(CountingStep(sleep=0.01), epoch(), CPU).run(StopRule("steps", 5), 1)
    assert not CaseResult(workload="w", mode="train", device="cpu", batch_size=2,
                          **vars(fast)).input_bound()


def test_trackers_bracket_only_the_measured_steps() -> None:
    step = CountingStep()

    class Meter(Tracker):
        def start(self) -> None:
            self.calls_at_start = step.calls

        def stop(self) -> None:
            self.calls_at_stop = step.calls

    meter = Meter()
    loop = StepLoop(step, epoch(), CPU, trackers=[meter])
    loop.run(StopRule("steps", 6), warmup_steps=2)
    assert (meter.calls_at_start, meter.calls_at_stop) == (2, 8)
    assert loop.window_steps == 6


def test_energy_figures_reach_the_result_and_the_table() -> None:
    from accelbench.measure.trackers.energy import energy_figures
    from accelbench.render.table import energy_lines
    from accelbench.results import CaseResult, Energy, RunRecord

    figures = energy_figures(120.0, measured_steps=60, steps_per_epoch=938, batch_size=64)
    assert figures["joules_per_step"] == 2.0 and figures["joules_per_epoch"] == 1876.0
    assert figures["samples_per_joule"] == 32.0
    case = CaseResult(workload="mnist", mode="train", device="cuda:0", batch_size=64,
                      energy=Energy(**figures, source="nvml"))
    missing = CaseResult(workload="mnist", mode="train", device="cpu", batch_size=64,
                         energy=Energy(joules=None, reason="rapl: not readable"))
    lines = energy_lines(RunRecord("r", "t", "v", cases=[case, missing]))
    assert lines == ["energy mnist train cuda:0: 2 J/step, 1.88e+03 J/epoch, 32 samples/J (nvml)",
                     "energy n/a on cpu: rapl: not readable"]


class ShapeRecordingStep(CountingStep):
    """Records each batch's size and whether it ran inside the measured region."""

    def __init__(self) -> None:
        super().__init__()
        self.measuring = False
        self.timed_sizes: list[int] = []

    def __call__(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if self.measuring:
            self.timed_sizes.append(len(batch[0]))
        return super().__call__(batch)


@pytest.mark.parametrize("stop", [StopRule("steps", 12), StopRule("time", 0.05)])
def test_partial_last_batch_never_lands_in_a_timed_window(stop: StopRule) -> None:
    step = ShapeRecordingStep()

    def sensors() -> dict:
        step.measuring = not step.measuring  # read just before and right after the timed steps
        return {}

    StepLoop(step, epoch(10, 4), CPU, trackers=[SensorTracker(CPU, sensors)],
             batch_size=4).run(stop, warmup_steps=2)
    assert len(step.timed_sizes) >= 5 and set(step.timed_sizes) == {4}
    assert set(step.sizes) == {4}  # warm-up too: the shapes it compiles are the timed ones


def test_a_data_set_smaller_than_one_batch_is_timed_as_it_is() -> None:
    step = CountingStep()
    measured = StepLoop(step, epoch(3, 4), CPU, batch_size=4).run(StopRule("steps", 4), 1)
    assert measured.measured_steps == 4 and set(step.sizes) == {3}


def test_sensors_are_read_after_warm_up_around_the_measured_steps() -> None:
    step = CountingStep()
    sensors = SensorTracker(CPU, lambda: {"calls": step.calls})
    StepLoop(step, epoch(), CPU, trackers=[sensors]).run(StopRule("steps", 6), warmup_steps=3)
    assert sensors.result.to_dict() == {"start": {"calls": 3}, "end": {"calls": 9}}


def test_epochs_warm_up_meets_the_partial_batch_shape_before_the_timed_epochs() -> None:
    # Under --compile a new shape recompiles: it must happen in warm-up, not in a timed epoch.
    step = CountingStep()
    measured = StepLoop(step, epoch(10, 4), CPU, batch_size=4, partial_batch=2).run(
        StopRule("epochs", 1), warmup_steps=2)
    assert step.sizes[:3] == [4, 4, 2]  # warm-up: two full steps, then the partial shape
    assert step.sizes[3:] == [4, 4, 2] and measured.measured_steps == 3
    assert measured.warmup_steps == 3


class VirtualClock:
    """``time.perf_counter`` of a device whose steps and synchronisations take known times; it
    reads in ticks of ``tick`` seconds (a coarse clock) and creeps 1 ns a reading."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 1000.0, tick

    def __call__(self) -> float:
        self.now += 1e-9
        return math.floor(self.now / self.tick) * self.tick


class TimedAsyncAdapter(FakeAsyncAdapter):
    def __init__(self, clock: VirtualClock, sync_s: float) -> None:
        super().__init__()
        self.clock, self.sync_s = clock, sync_s

    def synchronize(self, index: int) -> None:
        super().synchronize(index)
        self.clock.now += self.sync_s


@pytest.fixture
def virtual_time(monkeypatch: pytest.MonkeyPatch):
    import accelbench.measure.loop.step_loop as loop_module

    def install(tick: float, sync_s: float, step_s: float) -> tuple[Device, CountingStep]:
        clock = VirtualClock(tick)
        monkeypatch.setattr(time, "perf_counter", clock)
        monkeypatch.setattr(loop_module, "_TICK", [], raising=False)  # measured afresh on this clock
        step = CountingStep()
        original = step.__call__

        class Step(CountingStep):
            def __call__(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
                clock.now += step_s
                return original(batch)

        return Device(TimedAsyncAdapter(clock, sync_s), "fake", 0), Step()

    return install


def test_a_slow_synchronisation_is_amortised_by_longer_windows(virtual_time) -> None:
    """A 5 ms synchronisation with 0.2 ms steps: sized from one step's reading (5.2 ms, sync
    included) every step was its own window and read 5.2 ms; the windows must hold the sync."""
    device, step = virtual_time(tick=1e-9, sync_s=0.005, step_s=0.0002)
    measured = StepLoop(step, epoch(10**6, 4), device).run(StopRule("steps", 3000), warmup_steps=2)
    median = sorted(measured.step_times)[len(measured.step_times) // 2]
    assert median == pytest.approx(0.0002, rel=0.03)
    assert measured.sync_s == pytest.approx(0.005, rel=0.01)
    assert measured.steps_per_sample * 0.0002 >= 0.005 / 0.02 * 0.9


def test_a_coarse_clock_neither_explodes_the_window_nor_misreads_the_step(virtual_time) -> None:
    """A clock that ticks every millisecond reads a 50 µs step as 0 s: extrapolating from that
    made a window of 50,000 steps (a 1 s budget then ran for minutes on the hardware)."""
    device, step = virtual_time(tick=0.001, sync_s=0.0, step_s=0.00005)
    measured = StepLoop(step, epoch(10**6, 4), device).run(StopRule("time", 1.0), warmup_steps=2)
    assert measured.steps_per_sample <= 8000  # 100 ticks of 1 ms hold 2,000 steps; growth overshoots
    assert measured.measured_steps < 60_000
    median = sorted(measured.step_times)[len(measured.step_times) // 2]
    assert median == pytest.approx(0.00005, rel=0.02)
