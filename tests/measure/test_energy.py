"""Energy sources with recorded readings: a fake RAPL sysfs tree, a fake pynvml, powermetrics text."""

from __future__ import annotations

import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from accelbench.devices import DeviceSet
from accelbench.measure.trackers.energy import (
    EnergyMeter,
    EnergySource,
    EnergyUnavailable,
    RaplSource,
    energy_figures,
    energy_meter_for,
)
from accelbench.measure.trackers.energy_nvml import NvmlSource
from accelbench.measure.trackers.energy_powermetrics import (
    PowermetricsSource,
    parse_powermetrics,
)
from accelbench.measure.trackers.energy_source import mean_power_joules

DATA = Path(__file__).resolve().parents[1] / "data" / "energy"


# --- RAPL ------------------------------------------------------------------------------------
def write_domain(root: Path, name: str, label: str, energy_uj: int,
                 max_uj: int = 262_143_328_850) -> Path:
    domain = root / name
    domain.mkdir(parents=True, exist_ok=True)
    (domain / "name").write_text(f"{label}\n")
    (domain / "energy_uj").write_text(f"{energy_uj}\n")
    (domain / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return domain


def test_rapl_sums_packages_and_handles_a_wrap(tmp_path: Path) -> None:
    write_domain(tmp_path, "intel-rapl:0", "package-0", 1_000_000)
    write_domain(tmp_path, "intel-rapl:0:0", "core", 500_000)       # sub-domain: not summed
    write_domain(tmp_path, "intel-rapl:1", "package-1", 999_000, max_uj=1_000_000)
    write_domain(tmp_path, "intel-rapl:2", "psys", 7_000_000)       # whole platform: not summed
    source = RaplSource(tmp_path)
    assert source.available() == (True, "")
    source.start()
    write_domain(tmp_path, "intel-rapl:0", "package-0", 13_500_000)           # +12.5 J
    write_domain(tmp_path, "intel-rapl:0:0", "core", 90_000_000)
    write_domain(tmp_path, "intel-rapl:1", "package-1", 4_000, max_uj=1_000_000)  # wrapped: +5 mJ
    write_domain(tmp_path, "intel-rapl:2", "psys", 99_000_000)
    assert source.stop() == pytest.approx(12.5 + 0.005)


def test_rapl_missing_and_root_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ok, reason = RaplSource(tmp_path / "absent").available()
    assert not ok and "no RAPL interface" in reason
    write_domain(tmp_path, "intel-rapl:0", "package-0", 1)
    real_read_text = Path.read_text

    def root_only(path: Path, *args: object, **kwargs: object) -> str:
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real_read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", root_only)
    ok, reason = RaplSource(tmp_path).available()
    assert not ok and "readable only by root" in reason and "energy_uj" in reason


# --- NVML ------------------------------------------------------------------------------------
class FakeNvmlError(Exception):
    pass


def fake_pynvml(energy_mj: list[int] | None, power_mw: int = 0) -> types.ModuleType:
    """A pynvml with one GPU; ``energy_mj`` None means the GPU has no energy counter."""
    module = types.ModuleType("pynvml")
    module.NVMLError = FakeNvmlError
    readings = iter(energy_mj or [])
    module.nvmlInit = lambda: None
    module.nvmlDeviceGetHandleByIndex = lambda index: f"gpu{index}"
    module.nvmlDeviceGetHandleByUUID = lambda uuid: f"uuid:{uuid}"

    def total_energy(handle: str) -> int:
        if energy_mj is None:
            raise FakeNvmlError("Not Supported")
        return next(readings)

    module.nvmlDeviceGetTotalEnergyConsumption = total_energy
    module.nvmlDeviceGetPowerUsage = lambda handle: power_mw
    return module


def test_nvml_energy_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    # probe, start, stop; the window (2.5 s on the clock) is long enough for the counter
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([5, 1_000_000, 1_250_500]))
    ticks = iter([10.0, 12.5])
    source = NvmlSource(0, clock=lambda: next(ticks))
    assert source.available() == (True, "")
    source.start()
    assert source.stop() == pytest.approx(250.5)
    assert not source.estimated and "counter" in source.method


def test_nvml_without_counter_integrates_power(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(None, power_mw=200_000))
    source = NvmlSource(0, sample_interval_s=0.01)
    assert source.available() == (True, "")
    # The window lies between these two brackets whatever else the machine runs (a busy one
    # can delay the sampler thread's join by more than the 10% a single clock once allowed).
    outer = time.perf_counter()
    source.start()
    inner = time.perf_counter()
    time.sleep(0.2)
    inner = time.perf_counter() - inner
    joules = source.stop()
    outer = time.perf_counter() - outer
    assert 200.0 * inner <= joules <= 200.0 * outer


def test_nvml_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes "import pynvml" raise ImportError
    ok, reason = NvmlSource(0).available()
    assert not ok and "nvidia-ml-py" in reason


# --- powermetrics ----------------------------------------------------------------------------
APPLE = (DATA / "powermetrics-apple-m1.txt").read_text()
INTEL_MAC = (DATA / "powermetrics-intel-mac.txt").read_text()


def test_parse_powermetrics_keeps_complete_samples() -> None:
    samples = parse_powermetrics(APPLE)
    assert [seconds for seconds, _ in samples] == pytest.approx([0.50342, 0.50107])
    assert samples[0][1] == {"CPU": 4.512, "GPU": 8.123, "ANE": 0.0, "Combined": 12.635}
    assert samples[1][1]["CPU"] == 4.288
    assert parse_powermetrics(INTEL_MAC) == []


class FakePowermetrics:
    """Stands in for ``sudo -n powermetrics``: the probe run and the background process."""

    def __init__(self, output: str, returncode: int = 0, stderr: str = "") -> None:
        self.output, self.returncode, self.stderr = output, returncode, stderr
        self.commands: list[list[str]] = []
        self.signals: list[int] = []

    def run(self, command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        return subprocess.CompletedProcess(command, self.returncode, self.output, self.stderr)

    def popen(self, command: list[str], **kwargs: object) -> FakePowermetrics:
        self.commands.append(command)
        return self

    def send_signal(self, signum: int) -> None:
        self.signals.append(signum)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        return self.output, ""


def test_powermetrics_integrates_cpu_and_gpu_power() -> None:
    fake = FakePowermetrics(APPLE)
    source = PowermetricsSource(("CPU", "GPU"), popen=fake.popen, run=fake.run, system="Darwin")
    assert source.name == "powermetrics-cpu-gpu"
    assert source.available() == (True, "")
    source.start()
    time.sleep(0.05)
    started = time.perf_counter()
    joules = source.stop()
    elapsed = started - source._started
    # Weighted mean of (4.512 + 8.123) W over 0.50342 s and (4.288 + 7.912) W over 0.50107 s.
    mean_watts = (12.635 * 0.50342 + 12.2 * 0.50107) / (0.50342 + 0.50107)
    assert joules == pytest.approx(mean_watts * elapsed, rel=0.05)
    assert fake.commands[0][:3] == ["sudo", "-n", "powermetrics"]
    assert "cpu_power,gpu_power,thermal" in fake.commands[1] and fake.signals
    # item 20: the same call's GPU clock (time-weighted over the complete samples) is kept
    assert source.conditions == {"gpu_active_mhz": pytest.approx(1278.0)}


def test_powermetrics_reasons() -> None:
    ok, reason = PowermetricsSource(("CPU",), system="Linux").available()
    assert not ok and "only on macOS" in reason
    refused = FakePowermetrics("", returncode=1, stderr="sudo: a password is required\n")
    ok, reason = PowermetricsSource(("CPU",), run=refused.run, system="Darwin").available()
    assert not ok and "a password is required" in reason and "root" in reason
    intel = FakePowermetrics(INTEL_MAC)
    ok, reason = PowermetricsSource(("CPU",), run=intel.run, system="Darwin").available()
    assert not ok and "no CPU Power line" in reason


# --- the meter and the figures ---------------------------------------------------------------
class FakeSource(EnergySource):
    def __init__(self, name: str, joules: float | None, reason: str = "") -> None:
        self.name, self.joules, self.reason = name, joules, reason

    def available(self) -> tuple[bool, str]:
        return self.joules is not None, self.reason

    def start(self) -> None:
        pass

    def stop(self) -> float:
        assert self.joules is not None
        if self.joules < 0:
            raise EnergyUnavailable("sensor went away")
        return self.joules


def test_meter_uses_the_first_available_source_and_gives_figures() -> None:
    meter = EnergyMeter([FakeSource("absent", None, "not here"), FakeSource("fake", 40.0)])
    meter.start()
    reading = meter.stop()
    assert (reading.joules, reading.source, reading.reason) == (40.0, "fake", "")
    figures = reading.figures(measured_steps=20, steps_per_epoch=100, batch_size=8)
    assert figures["joules_per_step"] == pytest.approx(2.0)
    assert figures["joules_per_epoch"] == pytest.approx(200.0)
    assert figures["samples_per_joule"] == pytest.approx(20 * 8 / 40.0)
    assert figures["source"] == "fake"


def test_meter_reasons_when_nothing_reads() -> None:
    meter = EnergyMeter([FakeSource("a", None, "no sensor"), FakeSource("b", None, "not root")])
    meter.start()
    reading = meter.stop()
    assert reading.joules is None and reading.reason == "a: no sensor; b: not root"
    assert reading.figures(10, 5, 2)["joules_per_step"] is None
    failing = EnergyMeter([FakeSource("flaky", -1.0)])
    failing.start()
    assert failing.stop().reason == "sensor went away"


def test_energy_figures_edge_cases() -> None:
    assert energy_figures(None, 10, 5, 2) == {"joules": None, "joules_per_step": None,
                                              "joules_per_epoch": None, "samples_per_joule": None}
    assert energy_figures(10.0, 0, 5, 2)["joules_per_step"] is None
    assert energy_figures(10.0, 5, 0, 2)["joules_per_epoch"] is None
    with pytest.raises(EnergyUnavailable):
        mean_power_joules([], 1.0)


def test_the_cpu_meter_takes_its_sources_from_the_adapter() -> None:
    cpu = DeviceSet.current().select("cpu")[0]
    meter = energy_meter_for(cpu)
    assert [source.name for source in meter.sources] == ["rapl", "powermetrics-cpu"]
