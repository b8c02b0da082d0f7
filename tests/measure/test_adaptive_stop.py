"""Noise-adaptive stopping (issue 12): a time budget stops early once the median is precise
enough, runs to the budget when the steps are noisy, and reports the precision reached.

The loop's clock is replaced by a fake one that each step advances by a controlled amount, so the
noise is exactly what the test plants and nothing sleeps."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch

import accelbench.measure.loop.clock as clock_module
import accelbench.measure.loop.input_wait as input_wait_module
import accelbench.measure.loop.step_loop as loop_module
from accelbench.data.synthetic import EpochBatches
from accelbench.devices.base import Device
from accelbench.devices.cpu import CpuAdapter
from accelbench.errors import UsageError
from accelbench.measure.loop.step_loop import MIN_ADAPTIVE_SAMPLES, StepLoop
from accelbench.measure.loop.stop import DEFAULT_TARGET_CI_PCT, MIN_SAMPLES, StopRule
from accelbench.measure.trackers.region import Tracker
from accelbench.options import RunOptions
from accelbench.results import CaseResult

CPU = Device(CpuAdapter(), "cpu", 0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    for module in (loop_module, input_wait_module, clock_module):
        monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=fake.perf_counter))
    return fake


def noisy_step(clock: FakeClock, base_s: float, noise: float, seed: int = 0):
    """A step of ``base_s`` x (1 + uniform(-noise, noise)) seconds on the fake clock."""
    rng = random.Random(seed)

    def step(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        clock.now += base_s * (1 + rng.uniform(-noise, noise))
        return torch.tensor(1.0)

    return step


def measure(clock: FakeClock, noise: float, stop: StopRule) -> CaseResult:
    batches = EpochBatches([(torch.zeros(4, 2),)], 10_000, 4)
    measured = StepLoop(noisy_step(clock, 0.01, noise), batches, CPU).run(stop, warmup_steps=2)
    return CaseResult(workload="w", mode="train", device="cpu", batch_size=4, **vars(measured))


def test_quiet_steps_stop_as_soon_as_the_median_is_precise(clock: FakeClock) -> None:
    case = measure(clock, noise=0.01, stop=StopRule("time", 10.0, target_ci=2.0))
    assert case.stop_reason == "precision reached"
    assert len(case.step_times) == MIN_ADAPTIVE_SAMPLES  # first check passes: +-1% noise
    assert case.measured_time_s < 0.5  # seconds of budget left unused
    assert case.precision_reached() <= 0.02
    derived = case.to_dict()["derived"]
    assert derived["median_ci_rel_half_width"] == case.precision_reached()
    assert case.target_ci_pct == 2.0


def test_noisy_steps_run_to_the_budget_and_report_the_precision_reached(clock: FakeClock) -> None:
    case = measure(clock, noise=0.9, stop=StopRule("time", 2.0, target_ci=2.0))
    assert case.stop_reason == "time budget"
    assert 2.0 <= case.measured_time_s < 2.1
    assert case.precision_reached() > 0.02  # what the budget bought, reported honestly
    assert case.to_dict()["derived"]["median_ci_rel_half_width"] > 0.02


def test_moderate_noise_stops_once_enough_samples_narrow_the_interval(clock: FakeClock) -> None:
    case = measure(clock, noise=0.2, stop=StopRule("time", 60.0, target_ci=2.0))
    assert case.stop_reason == "precision reached"
    assert len(case.step_times) > MIN_ADAPTIVE_SAMPLES
    assert case.precision_reached() <= 0.02 < case.measured_time_s


def test_target_zero_measures_the_whole_budget(clock: FakeClock) -> None:
    case = measure(clock, noise=0.0, stop=StopRule("time", 1.0, target_ci=0))
    assert case.stop_reason == "time budget" and case.measured_time_s >= 1.0
    assert case.target_ci_pct is None


def test_minimum_samples_are_kept_whatever_the_target(clock: FakeClock) -> None:
    case = measure(clock, noise=0.0, stop=StopRule("time", 0.001, target_ci=50))
    assert len(case.step_times) == MIN_SAMPLES


def test_the_default_time_budget_has_the_default_target() -> None:
    assert StopRule().target_ci_pct == DEFAULT_TARGET_CI_PCT
    assert "+-2%" in StopRule().describe()
    assert StopRule("steps", 10).target_ci_pct == 0


@pytest.mark.parametrize("stop", [("steps", 10, 2.0), ("epochs", 1, 2.0), ("time", 5, -1),
                                  ("time", 5, 100)])
def test_bad_targets_are_usage_errors(stop: tuple) -> None:
    with pytest.raises(UsageError, match="--target-ci"):
        StopRule(*stop)


def test_the_target_reaches_a_worker_process_through_the_options() -> None:
    options = RunOptions(stop=StopRule("time", 3.0, target_ci=0.5))
    assert RunOptions.from_dict(options.to_dict()).stop == options.stop


class CoarseMeter(Tracker):
    """An energy tracker like NVML's counter: a measured figure needs a window of min_window_s."""

    min_window_s = 0.5


def test_a_coarse_energy_counter_keeps_a_precise_case_measuring_long_enough(clock: FakeClock) -> None:
    batches = EpochBatches([(torch.zeros(4, 2),)], 10_000, 4)
    loop = StepLoop(noisy_step(clock, 0.01, 0.01), batches, CPU, trackers=[CoarseMeter()])
    measured = loop.run(StopRule("time", 10.0, target_ci=2.0), warmup_steps=2)
    assert measured.stop_reason == "precision reached"
    # Without the meter the same steps stop at 20 samples (0.2 s): see the first test.
    assert CoarseMeter.min_window_s <= measured.measured_time_s < CoarseMeter.min_window_s + 0.1


def test_a_fixed_step_count_extends_only_the_energy_window(clock: FakeClock) -> None:
    """--steps 5 of 10 ms is 50 ms: far shorter than the counter needs. The extra steps are in the
    energy window (and its per-step division), never in the timing samples."""
    batches = EpochBatches([(torch.zeros(4, 2),)], 10_000, 4)
    loop = StepLoop(noisy_step(clock, 0.01, 0.0), batches, CPU, trackers=[CoarseMeter()])
    measured = loop.run(StopRule("steps", 5), warmup_steps=2)
    assert measured.measured_steps == 5 and len(measured.step_times) == 5
    assert measured.measured_time_s == pytest.approx(0.05)
    assert loop.window_steps == pytest.approx(CoarseMeter.min_window_s / 0.01, abs=1)


def test_without_a_meter_nothing_is_extended(clock: FakeClock) -> None:
    batches = EpochBatches([(torch.zeros(4, 2),)], 10_000, 4)
    loop = StepLoop(noisy_step(clock, 0.01, 0.0), batches, CPU)
    loop.run(StopRule("steps", 5), warmup_steps=2)
    assert loop.window_steps == 5
