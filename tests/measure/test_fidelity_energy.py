"""Energy figures say how they were measured and never report what the sensor cannot resolve
(issue 10, defect 16): NVML's energy counter advances only every ~100 ms."""

from __future__ import annotations

import sys

import pytest
from fakes import FakeClock, FakeNvml, fake_cuda_torch, fake_gpu_uuid

from accelbench.measure.trackers.energy import EnergyMeter, EnergySource
from accelbench.measure.trackers.energy_nvml import MIN_COUNTER_WINDOW_S, NvmlSource

WATTS = 300.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    clock = FakeClock(1000.05)
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([f"GPU-{fake_gpu_uuid(0)}"], watts=WATTS,
                                                        update_s=0.1, clock=clock))
    return clock


def _measure(clock: FakeClock, seconds: float) -> tuple[NvmlSource, float]:
    source = NvmlSource(0, torch_module=fake_cuda_torch(count=1), clock=clock)
    assert source.available() == (True, "")
    source.start()
    clock.advance(seconds)
    return source, source.stop()


def test_the_fake_counter_only_moves_every_100_ms(clock: FakeClock) -> None:
    nvml = sys.modules["pynvml"]
    first = nvml.nvmlDeviceGetTotalEnergyConsumption(nvml.uuids[0])
    clock.advance(0.03)
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(nvml.uuids[0]) == first


def test_a_window_shorter_than_the_counter_resolves_is_an_estimate_not_zero(clock) -> None:
    source, joules = _measure(clock, 0.03)  # the counter did not move: a difference says 0 J
    assert joules == pytest.approx(WATTS * 0.03)
    assert source.estimated and "estimate" in source.method


def test_a_long_window_is_the_counter_difference_within_one_update(clock) -> None:
    source, joules = _measure(clock, 3.0)
    assert not source.estimated and "counter" in source.method
    assert abs(joules - WATTS * 3.0) <= WATTS * 0.1  # at most one 100 ms update off
    assert "100 ms" in source.resolution


class _Zero(EnergySource):
    name = "zero"
    method = "energy counter difference"
    resolution = "counter in mJ, updated about every 100 ms"

    def available(self) -> tuple[bool, str]:
        return True, ""

    def start(self) -> None:
        pass

    def stop(self) -> float:
        return 0.0


def test_the_meter_never_reports_zero_joules() -> None:
    meter = EnergyMeter([_Zero()])
    meter.start()
    reading = meter.stop()
    assert reading.joules is None and "did not change" in reading.reason
    figures = reading.figures(10, 100, 8)
    assert figures["joules_per_step"] is None and figures["method"] == _Zero.method


def test_the_reading_carries_method_resolution_and_whether_it_is_estimated(clock) -> None:
    source = NvmlSource(0, torch_module=fake_cuda_torch(count=1), clock=clock)
    meter = EnergyMeter([source])
    assert meter.min_seconds == MIN_COUNTER_WINDOW_S  # what the loop should measure at least
    meter.start()
    clock.advance(0.05)
    figures = meter.stop().figures(measured_steps=5, steps_per_epoch=100, batch_size=8)
    assert figures["estimated"] is True and figures["joules"] == pytest.approx(WATTS * 0.05)
    assert figures["resolution"] and "estimate" in figures["method"]
