"""The sensors behind a sustained verdict (issue 26): item 9, a CPU clock that is no live sensor
(a VM's fixed /proc/cpuinfo figure) is "not readable here", tested on fake sysfs/proc trees;
item 20, the clock and temperatures are sampled while each interval runs (not after its closing
sync), and the device's own word for a slowdown (NVML's clock-event reasons, a Mac's thermal
pressure from the powermetrics call) and the memory temperature name the cause."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeAsyncAdapter

from accelbench.devices import Device
from accelbench.devices.cpu import CpuAdapter
from accelbench.devices.cpuinfo import cpu_clock_unreadable
from accelbench.measure.loop.sustained import SensorSeries, SustainedSeries, run_sustained
from accelbench.measure.trackers.energy import EnergyMeter, EnergySource
from accelbench.measure.trackers.interval_sensors import EVENTS, DeviceSensors, Reading
from accelbench.measure.trackers.sensors import cpu_sensors
from accelbench.results import SensorReading
from accelbench.results.sustained import THROTTLES, SustainedRecord, sustained_figures

CPU = Device(CpuAdapter(), "cpu", 0)
GPU = Device(FakeAsyncAdapter(), "fake", 0)

CPUINFO_VM = """processor\t: 0
model name\t: AMD EPYC 7B13
cpu MHz\t\t: 2596.126
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge hypervisor lahf_lm
"""
CPUINFO_METAL = CPUINFO_VM.replace(" hypervisor", "")


def _tree(root: Path, cpuinfo: str, cpufreq: bool) -> tuple[Path, Path]:
    sysfs = root / "sys" / "devices" / "system" / "cpu"
    (sysfs / "cpu0").mkdir(parents=True)
    if cpufreq:
        (sysfs / "cpu0" / "cpufreq").mkdir()
        (sysfs / "cpu0" / "cpufreq" / "scaling_cur_freq").write_text("3400000\n")
    info = root / "proc" / "cpuinfo"
    info.parent.mkdir()
    info.write_text(cpuinfo)
    return sysfs, info


# --- item 9: a clock that is not a live sensor ---------------------------------------------------
def test_a_vm_without_cpufreq_has_no_live_cpu_clock(tmp_path: Path) -> None:
    sysfs, info = _tree(tmp_path, CPUINFO_VM, cpufreq=False)
    reason = cpu_clock_unreadable("Linux", sysfs, info)
    assert "cpu MHz" in reason and "scaling_cur_freq" in reason and "hypervisor" in reason


def test_cpufreq_on_bare_metal_is_a_live_clock(tmp_path: Path) -> None:
    sysfs, info = _tree(tmp_path, CPUINFO_METAL, cpufreq=True)
    assert cpu_clock_unreadable("Linux", sysfs, info) == ""


def test_a_guests_cpufreq_is_not_the_hosts_clock(tmp_path: Path) -> None:
    sysfs, info = _tree(tmp_path, CPUINFO_VM, cpufreq=True)
    assert "hypervisor" in cpu_clock_unreadable("Linux", sysfs, info)
    assert "nominal" in cpu_clock_unreadable("Darwin", sysfs, info)


def test_an_unreadable_clock_is_recorded_as_not_readable_not_as_a_reading(tmp_path: Path) -> None:
    """The fixed 2596 MHz of /proc/cpuinfo was read as a live sensor: now no reading, a reason,
    in the case's sensors and in a sustained run's clock series alike."""
    sysfs, info = _tree(tmp_path, CPUINFO_VM, cpufreq=False)
    facts = cpu_sensors(lambda: cpu_clock_unreadable("Linux", sysfs, info))
    assert "cpu_mhz" not in facts
    assert facts["cpu_mhz_na"].startswith("not readable here: ") and "cpu MHz" in facts["cpu_mhz_na"]
    assert SensorReading.from_dict(facts).cpu_mhz_na == facts["cpu_mhz_na"]
    reader = DeviceSensors(CPU, meter=EnergyMeter([]), read=lambda: facts)
    reader.begin()
    clock = reader.read()["clock_mhz"]
    assert clock.value is None and "not readable here: " in clock.na
    live = cpu_sensors(lambda: "")
    assert "cpu_mhz_na" not in live  # a live clock is read as before (where psutil reads one)


# --- item 20: sampled during the interval --------------------------------------------------------
class BusyGpu:
    """A GPU whose SM clock is 1980 MHz while a step runs and 210 MHz once it is idle (a real
    GPU's clock falls within milliseconds of its last kernel)."""

    def __init__(self) -> None:
        self.running = False

    def step(self) -> int:
        self.running = True
        time.sleep(0.02)
        self.running = False  # the step's closing sync: the device is idle now
        return 1

    def sensors(self) -> dict[str, Any]:
        return {"gpu_sm_clock_mhz": 1980.0 if self.running else 210.0, "gpu_temperature_c": 70.0}


def test_the_clock_is_sampled_while_the_interval_runs_not_after_its_sync() -> None:
    gpu = BusyGpu()
    reader = DeviceSensors(GPU, meter=EnergyMeter([]), read=gpu.sensors, period_s=0.01)
    series = run_sustained(gpu.step, duration_s=0.6, interval_s=0.2, sensors=reader)
    clocks = series.sensors["clock_mhz"].values
    assert len(clocks) >= 2
    # A reading after each interval's sync read the idle 210 MHz every time.
    assert all(value is not None and value > 1500 for value in clocks), clocks


class Conditions(EnergySource):
    """An energy source that also reports the device's state over the window, as powermetrics'
    GPU and thermal samplers do."""

    name = "powermetrics-cpu-gpu"

    def __init__(self, conditions: dict[str, Any]) -> None:
        self._conditions = conditions

    def available(self) -> tuple[bool, str]:
        return True, ""

    def start(self) -> None:
        pass

    def stop(self) -> float:
        self.conditions = dict(self._conditions)
        return 12.0


def test_a_macs_gpu_clock_and_thermal_pressure_come_from_the_powermetrics_call() -> None:
    meter = EnergyMeter([Conditions({"gpu_active_mhz": 1110.0, "thermal_pressure": "Heavy"})])
    reader = DeviceSensors(Device(FakeAsyncAdapter(), "mps", 0), meter=meter, read=lambda: {})
    reader.begin()
    readings = reader.read()
    assert readings["clock_mhz"].value == 1110.0
    assert readings[EVENTS].events == ("thermal pressure Heavy",)
    assert readings["temperature_c"].value is None and readings["temperature_c"].na


def test_nvml_clock_events_seen_during_the_interval_are_kept() -> None:
    samples = iter([["gpu idle"], ["software power cap"], ["software power cap", "sync boost"]])

    def read() -> dict[str, Any]:
        return {"gpu_sm_clock_mhz": 1500.0, "gpu_clock_events": next(samples, [])}

    reader = DeviceSensors(GPU, meter=EnergyMeter([]), read=read, period_s=0.01)
    reader.begin()
    time.sleep(0.1)
    events = reader.read()[EVENTS]
    assert events.na == "" and events.events[:3] == ("gpu idle", "software power cap", "sync boost")


def test_a_device_without_clock_events_says_why() -> None:
    reader = DeviceSensors(GPU, meter=EnergyMeter([]), read=lambda: {"gpu_sm_clock_mhz": 1.0})
    reader.begin()
    events = reader.read()[EVENTS]
    assert events.na.startswith("n/a: ") and "NVML" in events.na


# --- item 20: the device's own word names the cause ----------------------------------------------
def _throttled_series(events: list[list[str] | None], memory_c: list[float] | None = None,
                      memory_limit: float | None = None) -> SustainedSeries:
    """Ten intervals, the last half at 70% of the first (with a little noise); the clock,
    temperature and power unchanged, so no sensor shows the cause."""
    rates = [100.0, 101.0, 99.0, 100.5, 99.5, 70.0, 70.5, 69.5, 70.2, 69.8]
    flat = SensorSeries([1500.0] * 10)
    series = SustainedSeries(1.0, 10.0, "steps", rates, [1.0] * 10, [float(i + 1) for i in range(10)],
                             {"clock_mhz": flat, "temperature_c": SensorSeries([70.0] * 10),
                              "power_w": SensorSeries([300.0] * 10)}, events)
    if memory_c is not None:
        series.sensors["memory_temperature_c"] = SensorSeries(memory_c, limit=memory_limit)
    return series


def test_nvmls_reason_is_named_as_the_cause_of_a_throttle() -> None:
    series = _throttled_series([[]] * 5 + [["software power cap"]] * 5)
    figures = sustained_figures(series)
    assert figures.verdict == THROTTLES
    assert figures.cause == "software power cap (5/5 intervals)"
    assert figures.sensors["clock_events"] == "software power cap in 5/5 sustained intervals (0/2 burst)"


def test_a_macs_thermal_pressure_is_named_and_idle_or_boost_never_is() -> None:
    series = _throttled_series([["gpu idle"]] * 5 + [["thermal pressure Heavy", "sync boost"]] * 5)
    assert sustained_figures(series).cause == "thermal pressure Heavy (5/5 intervals)"
    benign = sustained_figures(_throttled_series([["sync boost"]] * 10))
    assert benign.cause.startswith("cause not visible")


def test_the_memory_temperature_at_its_limit_is_named() -> None:
    series = _throttled_series([None] * 10, memory_c=[80.0] * 5 + [94.0] * 5, memory_limit=95.0)
    series.events_na = "n/a: no clock-event reasons"
    cause = sustained_figures(series).cause
    assert cause == "memory temperature at limit (94 °C, limit 95 °C)"


def test_unread_clock_events_are_named_among_the_unreadable() -> None:
    series = _throttled_series([None] * 10)
    series.events_na = "n/a: fake gives no clock-event reasons"
    figures = sustained_figures(series)
    assert figures.cause == "cause not visible (not readable here: clock events)"
    assert figures.sensors["clock_events"] == "n/a: fake gives no clock-event reasons"


def test_clock_events_survive_the_records_json() -> None:
    series = _throttled_series([[]] * 5 + [["software power cap"]] * 4 + [None])
    record = SustainedRecord.judge(series)
    again = SustainedRecord.from_dict(record.to_dict())
    assert again.series.events == series.events and again.figures == record.figures


@pytest.mark.parametrize("reading", [Reading(None, events=("software power cap",)),
                                     Reading.missing("no reasons here")])
def test_run_sustained_keeps_one_events_entry_per_interval(reading: Reading) -> None:
    class Reader:
        def begin(self) -> None:
            pass

        def read(self) -> dict[str, Reading]:
            return {"clock_mhz": Reading(1.0), EVENTS: reading}

    series = run_sustained(lambda: 1, duration_s=0.03, interval_s=0.01, sensors=Reader())
    assert len(series.events) == len(series.work)
    assert EVENTS not in series.sensors
    if reading.na:
        assert series.events == [None] * len(series.work) and series.events_na == reading.na
    else:
        assert series.events[0] == ["software power cap"]
