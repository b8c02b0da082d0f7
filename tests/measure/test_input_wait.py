"""Input wait on an asynchronous device is the time the DEVICE sat idle for a batch, not the
host's fetch time (issue 10, defect 15), tested on a fake device with a real queue; and timing
events that fail the way MPS's do never fail a case nor enter MPS's timed loop (issue 19, 1)."""

from __future__ import annotations

import time

import pytest
import torch
from fakes import (
    MAC_FACTS_ARM,
    EventQueueAdapter,
    FakeAsyncAdapter,
    FakeMpsGpu,
    FakeQueueAdapter,
    MpsLikeEvent,
    StaleOnReuseEvent,
    SyncLog,
    UnreadableEvent,
)

from accelbench.devices.base import Device
from accelbench.devices.mps import MpsAdapter
from accelbench.measure.loop.input_wait import (
    EVENTS,
    HOST,
    UPPER_BOUND,
    UPPER_BOUND_EVENT_FAILED,
    UPPER_BOUND_UNSAFE_EVENTS,
)
from accelbench.measure.loop.step_loop import StepLoop
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


def run(device_s: float, fetch_s: float, adapter: FakeQueueAdapter | None = None) -> CaseResult:
    adapter = adapter or FakeQueueAdapter()

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


# --- issue 19, item 1: timing events that fail as MPS's do ------------------------------------------
def _mps_device(monkeypatch: pytest.MonkeyPatch) -> tuple[Device, FakeMpsGpu]:
    """The real MpsAdapter on a fake Apple GPU, with torch.Event behaving as MPS's events do."""
    gpu = FakeMpsGpu()
    monkeypatch.setattr(torch, "Event", gpu.event)
    return Device(MpsAdapter(gpu.torch(), MAC_FACTS_ARM), "mps", 0), gpu


def test_mps_device_bound_case_records_no_event_and_does_not_fail(monkeypatch) -> None:
    # A device-bound step (20 ms queued, 5 ms fetch): the events around a fetch both complete
    # when the queued step does, and MPS's elapsed_time raises for equal times. Before the fix
    # the loop used MPS's events: this run raised "End event ... was not recorded after start
    # event ...", and every step paid two command-buffer commits.
    device, gpu = _mps_device(monkeypatch)

    def step(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        gpu.enqueue(0.02)
        return torch.tensor(1.0)

    measured = StepLoop(step, SlowLoader(0.005), device).run(StopRule("steps", 4), warmup_steps=1)
    assert gpu.commits == 0  # no event recorded, in the timed window or before it
    assert measured.measured_steps == 4
    assert measured.input_wait_method == UPPER_BOUND_UNSAFE_EVENTS
    assert "upper bound" in measured.input_wait_method
    assert measured.input_wait_s == measured.input_fetch_s >= 4 * 0.005


def test_only_mps_says_its_events_are_unsafe_per_step() -> None:
    from fakes import fake_torch

    from accelbench.devices.cpu import CpuAdapter
    from accelbench.devices.cuda import CudaAdapter
    from accelbench.devices.generic import GenericAcceleratorAdapter
    from accelbench.devices.xpu import XpuAdapter

    assert not MpsAdapter(fake_torch(), MAC_FACTS_ARM).step_events_safe
    assert all(adapter.step_events_safe for adapter in (
        CpuAdapter(), CudaAdapter(fake_torch()), XpuAdapter(fake_torch()),
        GenericAcceleratorAdapter("hpu", fake_torch())))


def test_the_mps_like_event_fails_as_mps_does() -> None:
    # The fake itself: back-to-back events behind queued work raise on reading; each record
    # commits; a re-recorded event reads its previous timestamp.
    gpu = FakeMpsGpu()
    first, second = gpu.event(enable_timing=True), gpu.event(enable_timing=True)
    gpu.enqueue(0.01)
    first.record()
    second.record()
    with pytest.raises(RuntimeError, match="was not recorded after start event"):
        first.elapsed_time(second)
    assert gpu.commits == 2
    first.record()
    assert first._stamp() == first.stamps[0]


def test_an_event_whose_reading_raises_falls_back_to_the_host_time() -> None:
    # Events that fail as MPS's do, on a device that claims they are safe: the device-bound case
    # completes, its input wait becomes the host fetch time, labelled with the error. Before the
    # fix the RuntimeError failed the case.
    adapter = EventQueueAdapter(lambda adapter: MpsLikeEvent(adapter))
    adapter.commits = 0
    case = run(device_s=0.02, fetch_s=0.005, adapter=adapter)
    assert case.input_wait_method.startswith(UPPER_BOUND_EVENT_FAILED)
    assert "was not recorded after start event" in case.input_wait_method
    assert case.input_wait_s == case.input_fetch_s >= 6 * 0.005
    assert case.measured_steps == 6


def test_an_unreadable_event_never_fails_the_case() -> None:
    case = run(device_s=0.002, fetch_s=0.002, adapter=EventQueueAdapter(UnreadableEvent))
    assert case.input_wait_method.startswith(UPPER_BOUND_EVENT_FAILED)
    assert "illegal memory access" in case.input_wait_method
    assert case.input_wait_s == case.input_fetch_s > 0


def test_an_event_that_cannot_be_recorded_never_fails_the_case() -> None:
    class Unrecordable(FakeQueueAdapter):
        def timing_event(self, index: int):
            event = super().timing_event(index)
            if self.syncs > 2:  # fine in the trial pair, broken in the loop

                def record() -> None:
                    raise RuntimeError("device lost")
                event.record = record
            return event

    case = run(device_s=0.002, fetch_s=0.002, adapter=Unrecordable())
    assert case.input_wait_method == f"{UPPER_BOUND_EVENT_FAILED}RuntimeError: device lost)"
    assert case.input_wait_s == case.input_fetch_s > 0


def test_events_are_never_recycled() -> None:
    # Events that read their previous recording's timestamp when recorded again: the loop used
    # to reuse settled events, and then read an input-starved case (the device idles ~25 ms a
    # step) as waiting for nothing.
    adapter = EventQueueAdapter(StaleOnReuseEvent)
    case = run(device_s=0.005, fetch_s=0.03, adapter=adapter)
    assert case.input_wait_method == EVENTS
    assert case.input_wait_s >= 6 * 0.02
    assert case.input_bound()
    recorded = [event for event in adapter.events if event.recorded]
    assert len(recorded) >= 2 * case.measured_steps  # two a fetch, besides the trial pair
    # Each recorded once; a window's spare events (made before it, for a fetch it did not make)
    # are never recorded at all. (The factory's first trial event is recorded twice: the probe
    # that finds these events keep their first recording, so none is recorded ahead.)
    assert all(len(event.recorded) <= 1 for event in adapter.events[1:])


def test_no_timing_event_is_created_inside_a_timed_window() -> None:
    """Issue 26, item 21: the input-wait events were created inside the timed window, a fresh one
    before and after every fetch (a host call, cudaEventCreate on CUDA, in the steps' time). They
    are made before each window's clock starts; each is still recorded once."""

    class Logged(SyncLog, FakeQueueAdapter):
        def timing_event(self, index: int):
            self.log.append("create")
            return super().timing_event(index)

    adapter = Logged()

    def step(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        adapter.log.append("step")
        adapter.enqueue(0.001)
        return torch.tensor(1.0)

    measured = StepLoop(step, SlowLoader(0.0), Device(adapter, "fake", 0)).run(
        StopRule("steps", 8), warmup_steps=2)
    assert measured.input_wait_method == EVENTS
    inside = False  # a window runs from its first step to the synchronisation that closes it
    for entry in adapter.log:
        assert not (inside and entry == "create"), adapter.log
        inside = entry == "step" or (inside and entry != "sync")
    assert adapter.log.count("step") >= 10
