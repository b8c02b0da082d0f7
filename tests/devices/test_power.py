"""Power state: read where the OS says it, "n/a" with the reason where it does not, shown by compare."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from conftest_report import case, record
from rich.console import Console

from accelbench.compare import LabelledRun, compare_runs
from accelbench.devices import power
from accelbench.devices.environment import collect_environment
from accelbench.render.compare_table import comparison_renderable


def _cpufreq(root: Path, values: dict[int, dict[str, str]]) -> Path:
    for cpu, files in values.items():
        folder = root / f"cpu{cpu}" / "cpufreq"
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text + "\n")
    return root


@pytest.mark.skipif(platform.system() != "Linux", reason="cpufreq is Linux-only")
def test_governor_and_preference_from_sysfs(tmp_path: Path) -> None:
    root = _cpufreq(tmp_path, {0: {"scaling_governor": "powersave",
                                   "energy_performance_preference": "balance_power"},
                               1: {"scaling_governor": "powersave",
                                   "energy_performance_preference": "balance_power"},
                               10: {"scaling_governor": "performance"}})
    assert power.cpu_governor(root) == {"value": "powersave (2 CPUs), performance (1 CPUs)"}
    assert power.energy_performance_preference(root) == {"value": "balance_power"}
    same = _cpufreq(tmp_path / "same", {0: {"scaling_governor": "performance"}})
    assert power.cpu_governor(same) == {"value": "performance"}
    hidden = power.cpu_governor(tmp_path / "nothing")
    assert "na" in hidden and "VM or container" in hidden["na"]


def test_battery_states(monkeypatch) -> None:
    import psutil

    class Battery:
        percent, power_plugged = 41.0, False

    monkeypatch.setattr(psutil, "sensors_battery", lambda: Battery())
    assert power.on_ac_power() == {"value": "battery (41%)"}
    Battery.power_plugged = True
    assert power.on_ac_power() == {"value": "AC"}
    monkeypatch.setattr(psutil, "sensors_battery", lambda: None)
    assert "no battery reported" in power.on_ac_power()["na"]


def test_macos_pmset_parsing() -> None:
    text = ("System-wide power settings:\nCurrently in use:\n standby 1\n lowpowermode 1\n"
            " powermode 0\n sleep 1\n")
    assert power.macos_power_mode(lambda argv: text) == {"value": {"lowpowermode": "1",
                                                                   "powermode": "0"}}
    assert "na" in power.macos_power_mode(lambda argv: "Currently in use:\n sleep 1\n")


def test_every_run_records_each_fact_or_its_reason() -> None:
    facts = collect_environment()["power"]
    assert set(facts) == {"load_per_cpu", "power_source", "cpu_governor", "energy_performance_preference",
                          "macos_power_mode", "gpu_power_limit_w"}
    for name, fact in facts.items():
        assert ("value" in fact) != ("na" in fact), name
        assert fact.get("na", "x"), name  # a missing fact always says why


def test_compare_shows_a_power_difference_beside_the_verdict() -> None:
    runs = []
    for label, governor in (("a", "performance"), ("b", "powersave")):
        run = record(label, [case()])
        run.environment["power"] = {"cpu_governor": {"value": governor},
                                    "power_source": {"na": "no battery reported"}}
        runs.append(LabelledRun(label, run))
    console = Console(width=400, record=True)
    console.print(comparison_renderable(compare_runs(runs)))
    text = console.export_text()
    assert "differs: cpu governor performance vs powersave" in text
    assert "power source" not in text  # n/a on both sides is no difference


def test_a_load_change_between_runs_is_shown_a_small_one_is_not() -> None:
    def env(load: float) -> dict:
        return {"power": {"load_per_cpu": {"value": load}}}

    assert power.power_differences(env(2.4), env(0.7)) == "load per CPU 2.4 vs 0.7"
    assert power.power_differences(env(0.5), env(0.7)) == ""


# --- issue 19, item 13: the power limits are read in the process's one NVML session ----------------
def test_power_limits_share_the_processs_one_nvml_session(monkeypatch) -> None:
    # gpu_power_limits opened and shut its own NVML session on every call: every run paid an
    # init/shutdown pair (seconds on a multi-GPU host without persistence mode), and its shutdown
    # closed nothing else's session only because NVML counts references.
    import sys

    from fakes import FakeNvml, fake_cuda_torch, fake_gpu_uuid

    from accelbench.devices.cuda import CudaAdapter

    gpus = [f"GPU-{fake_gpu_uuid(1)}", f"GPU-{fake_gpu_uuid(0)}"]
    nvml = FakeNvml(gpus)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    for _ in range(3):
        assert power.gpu_power_limits() == {"value": {gpus[0]: 700.0, gpus[1]: 700.0}}
    assert "memory_free_bytes" in CudaAdapter(fake_cuda_torch(count=2)).info(0)
    assert (nvml.inits, nvml.shutdowns) == (1, 0)


def test_power_limits_without_nvml_say_why(monkeypatch) -> None:
    import sys

    from fakes import FakeNvml

    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: the import fails
    reason = power.gpu_power_limits()["na"]
    assert reason.startswith("NVML not readable: nvidia-ml-py is not installed"), reason
    nvml = FakeNvml([])

    def no_driver() -> None:
        raise nvml.NVMLError("Driver Not Loaded")

    monkeypatch.setattr(nvml, "nvmlInit", no_driver)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert power.gpu_power_limits() == {"na": "NVML: Driver Not Loaded"}
    monkeypatch.setattr(nvml, "nvmlInit", lambda: None)
    assert power.gpu_power_limits() == {"na": "NVML lists no GPU"}
