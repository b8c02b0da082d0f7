"""Input wait on an asynchronous device is the time the DEVICE sat idle for a batch, not the
host's fetch time (issue 10, defect 15), tested on a fake device with a real queue."""

from __future__ import annotations

import time

import torch
from fakes import FakeAsyncAdapter, FakeQueueAdapter

from accelbench.devices.base import Device
from accelbench.measure.input_wait import EVENTS, HOST, UPPER_BOUND
from accelbench.measure.loop import StepLoop
from accelbench.options import StopRule
from accelbench.results import CaseResult


class SlowLoader:
    """Batches that take ``fetch_s`` of host time each."""

    def __init__(self, fetch_s: float) -> None:
        self.fetch_s = fetch_s

    def __iter__(self):
        while True:
            time.sleep(self.fetch_s)
            yield (torch.zeros(2, 2),)


def run(device_s: float, fetch_s: float) -> CaseResult:
    adapter = FakeQueueAdapter()

    def step(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        adapter.enqueue(device_s)  # returns at once, like a kernel launch
        return torch.tensor(1.0)

    measured = StepLoop(step, SlowLoader(fetch_s), Device(adapter, "fake", 0)).run(
        StopRule("steps", 6), warmup_steps=1)
    return CaseResult(workload="w", mode="train", device="fake:0", batch_size=2, **vars(measured))


def test_device_bound_case_with_a_slow_looking_fetch_is_not_input_bound() -> None:
    # The host needs 15 ms per batch, but the device is busy 50 ms per step: every fetch hides
    # behind queued work. (Fetching before queueing the step, as the loop used to, or counting
    # host fetch time, calls this case 23-30% input-bound.)
    case = run(device_s=0.05, fetch_s=0.015)
    assert case.input_wait_method == EVENTS
    assert case.input_fetch_s >= 6 * 0.015
    assert case.input_wait_s < 0.05 * case.measured_time_s  # margin for a loaded test machine
    assert not case.input_bound()
    assert min(case.step_times) >= 0.049  # the device's time, not the host's


def test_input_starved_case_is_input_bound() -> None:
    # 30 ms per batch on the host, 5 ms of device work: the device idles ~25 ms a step.
    case = run(device_s=0.005, fetch_s=0.03)
    assert case.input_wait_s >= 6 * 0.02
    assert case.input_bound()
    assert case.to_dict()["derived"]["input_bound"] is True


def test_without_timing_events_the_host_time_is_labelled_an_upper_bound() -> None:
    # FakeAsyncAdapter has no timing events and runs on the CPU, where torch times no events.
    measured = StepLoop(lambda b: torch.tensor(1.0), SlowLoader(0.005),
                        Device(FakeAsyncAdapter(), "fake", 0)).run(StopRule("steps", 3), 0)
    assert measured.input_wait_method == UPPER_BOUND
    assert measured.input_wait_s == measured.input_fetch_s >= 3 * 0.005


def test_on_the_cpu_the_fetch_time_is_the_idle_time() -> None:
    from accelbench.devices.cpu import CpuAdapter

    measured = StepLoop(lambda b: torch.tensor(1.0), SlowLoader(0.005),
                        Device(CpuAdapter(), "cpu", 0)).run(StopRule("steps", 3), 0)
    assert measured.input_wait_method == HOST
    assert measured.input_wait_s == measured.input_fetch_s >= 3 * 0.005
