"""Issue 27, "The loop owns its stop rule": the synced timers become one (``measure/loop/clock.py``).

The peak's products, the bandwidth's repeats, the queued windows, the probes' stretches, the
loop's sync cost and epoch end and the selftest's work sizing each synchronised and read
``time.perf_counter`` themselves. Now they all time through ``clock.synced_seconds``: here a
simulated device and clock (work and a synchronisation each advance it by a known amount, so
nothing depends on how fast this machine is) hold every one of them to the same rule: the
stretch starts after one synchronisation and ends after another, whose latency it includes.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from accelbench.devices.numerics import get_precision
from accelbench.measure.ceilings import bandwidth, peak
from accelbench.measure.loop import clock, queued
from accelbench.measure.loop import step_loop as loop
from accelbench.probes import cells as probes
from accelbench.selftest.work import Work

WORK_S, SYNC_S = 0.25, 0.002


class SimulatedDevice:
    """A device whose clock advances only by what it is given to do."""

    torch_device = torch.device("cpu")

    def __init__(self) -> None:
        self.now = 0.0
        self.log: list[str] = []

    def synchronize(self) -> None:
        self.now += SYNC_S
        self.log.append("sync")

    def work(self) -> None:
        self.now += WORK_S
        self.log.append("work")

    def clock(self) -> float:
        self.log.append("clock")
        return self.now


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> SimulatedDevice:
    simulated = SimulatedDevice()
    monkeypatch.setattr(clock, "time", SimpleNamespace(perf_counter=simulated.clock))
    return simulated


def test_the_stretch_lies_between_two_synchronisations(device: SimulatedDevice) -> None:
    assert clock.synced_seconds(device, device.work, 3) == pytest.approx(3 * WORK_S + SYNC_S)
    assert device.log == ["sync", "clock", "work", "work", "work", "sync", "clock"]


def test_the_ceilings_time_through_the_one_clock(device: SimulatedDevice) -> None:
    # best_time runs the work once untimed first (allocation, kernel choice).
    assert bandwidth.best_time(device, device.work, repeats=3) == pytest.approx(WORK_S + SYNC_S)
    assert queued.window_timer(device, device.work)(5) == pytest.approx(5 * WORK_S + SYNC_S)
    a = torch.ones(4, 4)
    # The products themselves take no simulated time: only the closing sync is on the clock.
    assert peak._timed_products(device, get_precision("fp32"), a, a, 3) == pytest.approx(SYNC_S)


def test_the_loop_probes_and_selftest_time_through_the_one_clock(device: SimulatedDevice) -> None:
    assert loop.synchronize_cost(device) == pytest.approx(SYNC_S)
    timing = probes.time_op(device.work, device)
    assert timing.best == timing.median == pytest.approx(WORK_S + SYNC_S)
    # Eight real (tiny) products at no simulated cost: a unit is an eighth of the sync.
    assert Work(device, side=4).units_for(SYNC_S) == 8
