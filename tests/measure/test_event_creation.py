"""Issue 34: no CUDA event is created inside a timed window. torch creates a device event at the
object's first ``record()`` (CUDAEvent.h), so making the Python objects before the window (issue
26) left ``cudaEventCreate`` inside it. The fakes and the Ampere personality now create on first
record, as torch does; the event factory records each event once where it is made."""

from __future__ import annotations

import time

import pytest
import torch
from fakes import EventQueueAdapter, FakeEvent, FakeQueueAdapter, StaleOnReuseEvent, SyncLog

from accelbench.devices import DeviceSet
from accelbench.devices.base import Device
from accelbench.devices.events import reads_a_new_record, timing_event_factory
from accelbench.measure.generation.generation_clocks import EVENTS, EventClock, clock_maker
from accelbench.measure.loop.input_wait import EVENTS as INPUT_EVENTS
from accelbench.measure.loop.step_loop import StepLoop
from accelbench.options import StopRule


class Logged(SyncLog, FakeQueueAdapter):
    """Logs each synchronisation, each step and each device event created (at first record)."""

    def event_created(self) -> None:
        super().event_created()
        self.log.append("create")


class Batches:
    def __iter__(self):
        while True:
            time.sleep(0.001)
            yield (torch.zeros(2, 2),)


def test_the_fake_creates_an_event_at_its_first_record_as_torch_does() -> None:
    adapter = FakeQueueAdapter()
    event = FakeEvent(adapter)
    assert adapter.events_created == 0  # the object alone holds no device event
    event.record()
    event.record()
    assert adapter.events_created == 1


def test_no_event_is_created_inside_a_window_of_the_timed_loop() -> None:
    adapter = Logged()

    def step(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        adapter.log.append("step")
        adapter.enqueue(0.001)
        return torch.tensor(1.0)

    measured = StepLoop(step, Batches(), Device(adapter, "fake", 0)).run(StopRule("steps", 8),
                                                                       warmup_steps=2)
    assert measured.input_wait_method == INPUT_EVENTS
    assert adapter.events_created > 0
    inside = False  # a window runs from its first step to the synchronisation that closes it
    for entry in adapter.log:
        assert not (inside and entry == "create"), adapter.log
        inside = entry == "step" or (inside and entry != "sync")
    assert adapter.log.count("step") >= 10


def test_no_event_is_created_while_a_generation_round_is_timed() -> None:
    adapter = Logged()
    device = Device(adapter, "fake", 0)
    steps = 6
    clock = clock_maker(device, steps)()
    assert isinstance(clock, EventClock) and clock.method == EVENTS
    clock.start()
    before = adapter.events_created
    clock.first_token()
    for _ in range(steps):
        adapter.enqueue(0.002)
        clock.step()
    round_ = clock.finish()
    assert adapter.events_created == before  # every event of the round was created by start()
    assert len(round_.token_times_s) == steps
    # a record after the creating one reads the new recording: each step is the device's 2 ms
    assert min(round_.token_times_s) >= 0.0019
    assert round_.decode_s == pytest.approx(sum(round_.token_times_s))


def test_a_device_that_reads_an_old_recording_gets_events_created_in_the_window_but_read_right() -> None:
    # MPS's events before torch's per-record generations: recorded again, they read the first
    # recording. Recording them once ahead would time each window from before it began.
    stale = EventQueueAdapter(StaleOnReuseEvent)
    device = Device(stale, "fake", 0)
    assert not reads_a_new_record(device, lambda: stale.timing_event(0))
    make = timing_event_factory(device)
    assert make is not None and not make().recorded  # made, not recorded
    fresh = FakeQueueAdapter()
    assert reads_a_new_record(Device(fresh, "fake", 0), lambda: FakeEvent(fresh))


def test_on_the_ampere_personality_no_event_is_created_in_a_timed_window(personality) -> None:
    """torch.Event on the emulated GPU creates its CUDA event at the first record: the timed
    loop's windows and the decode steps record events and create none."""
    from test_generation import tiny

    from accelbench.measure.generation import rounds as gen

    workload, model = tiny()
    with personality("ampere") as journal:
        device = DeviceSet.current().select("cuda:0")[0]
        figures = gen.measure_generation(workload, model.to(device.torch_device), device, prompt_len=6,
                                         new_tokens=8, rounds=2, warmup_rounds=1)
        model = model.to(device.torch_device)
        batch = torch.zeros(2, 6, dtype=torch.long, device=device.torch_device)

        def step(_: object) -> torch.Tensor:
            return model(batch)[0].sum()

        measured = StepLoop(step, [(batch,)] * 64, device).run(StopRule("steps", 6), warmup_steps=1)
    assert figures.timing_method == gen.EVENTS
    assert measured.input_wait_method == INPUT_EVENTS
    decode_steps = r"accelbench/measure/generation/generation_clocks\.py:\d+ in step$"
    # the records inside a window (prepare() makes the window's events before its clock starts)
    window = r"accelbench/measure/loop/input_wait\.py:\d+ in _event$"
    assert journal.event_records(under=decode_steps) and journal.event_records(under=window)
    created = journal.event_creations(under=decode_steps) + journal.event_creations(under=window)
    assert created == [], journal.describe(created)
