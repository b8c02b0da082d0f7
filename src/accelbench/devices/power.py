"""The machine's power state, recorded with every run: results move with it.

A laptop on battery, a "power saver" OS mode, a CPU governor of ``powersave`` or a GPU whose
power limit was lowered all slow a benchmark down (pytorch/pytorch#164936, ml-explore/mlx-examples
#1029). Each fact is ``{"value": ...}`` when the OS says it, or ``{"na": reason}`` when it does
not, so a missing fact is never mistaken for a default. ``compare`` shows a difference in them
beside its verdict.

Read without touching the accelerators through torch: NVML needs no CUDA context, so the
parent process does not take a GPU away from its workers.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelbench.devices.nvml import NvmlUnavailable, nvml_session

CPUFREQ = Path("/sys/devices/system/cpu")
Fact = dict[str, Any]


def _value(value: Any) -> Fact:
    return {"value": value}


def _na(reason: str) -> Fact:
    return {"na": reason}


def on_ac_power() -> Fact:
    try:
        import psutil
    except ImportError:
        return _na("psutil is not installed")
    sensor = getattr(psutil, "sensors_battery", None)
    battery = sensor() if sensor is not None else None
    if battery is None:
        return _na("no battery reported (a desktop, server or VM: mains power assumed, not known)")
    if battery.power_plugged is None:
        return _na("the OS reports a battery but not whether it is charging")
    return _value("AC" if battery.power_plugged else f"battery ({battery.percent:.0f}%)")


def _per_cpu_file(name: str, root: Path) -> Fact:
    """A cpufreq setting across CPUs: one value, or "a (cpu0-3), b (cpu4-7)" when they differ."""
    if platform.system() != "Linux":
        return _na(f"cpufreq {name} exists only on Linux; this is {platform.system()}")
    files = sorted(root.glob(f"cpu[0-9]*/cpufreq/{name}"), key=lambda p: int(p.parent.parent.name[3:]))
    if not files:
        return _na(f"no {root}/cpu*/cpufreq/{name} (a VM or container that hides frequency "
                   "scaling, or a driver without it)")
    values: dict[str, list[str]] = {}
    for file in files:
        try:
            values.setdefault(file.read_text().strip(), []).append(file.parent.parent.name)
        except OSError as error:
            return _na(f"cannot read {file}: {error}")
    if len(values) == 1:
        return _value(next(iter(values)))
    return _value(", ".join(f"{value} ({len(cpus)} CPUs)" for value, cpus in values.items()))


def cpu_governor(root: Path = CPUFREQ) -> Fact:
    return _per_cpu_file("scaling_governor", root)


def energy_performance_preference(root: Path = CPUFREQ) -> Fact:
    return _per_cpu_file("energy_performance_preference", root)


def macos_power_mode(run: Callable[[list[str]], str] | None = None) -> Fact:
    """``pmset -g``: the active power source and its low-power / power-mode settings."""
    if platform.system() != "Darwin" and run is None:
        return _na(f"pmset exists only on macOS; this is {platform.system()}")
    if run is None and shutil.which("pmset") is None:
        return _na("pmset is not on PATH")
    try:
        text = run(["pmset", "-g"]) if run else subprocess.run(
            ["pmset", "-g"], capture_output=True, text=True, timeout=5, check=True).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return _na(f"pmset -g failed: {error}")
    wanted = ("lowpowermode", "powermode", "highpowermode")
    settings = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].lower() in wanted:
            settings[parts[0]] = parts[1]
    return _value(settings) if settings else _na("pmset -g lists no power-mode setting")


def gpu_power_limits() -> Fact:
    """Each NVIDIA GPU's enforced power limit (W) through NVML, keyed by UUID, in this process's
    one NVML session (devices/nvml.py): an init/shutdown pair per run costs seconds on a
    multi-GPU host without persistence mode."""
    try:
        pynvml = nvml_session()
    except Exception as error:  # not installed, no driver, no GPU: a reason, never a failed run
        reason = str(error) if isinstance(error, NvmlUnavailable) else f"{type(error).__name__}: {error}"
        return _na(reason if reason.startswith("NVML") else f"NVML not readable: {reason}")
    try:
        limits = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            limits[str(uuid)] = pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
        return _value(limits) if limits else _na("NVML lists no GPU")
    except Exception as error:
        return _na(f"NVML power limit not readable: {error}")


#: A 1-minute load per CPU at least this high when a run began: the machine was busy, and the
#: run's figures (a shared line's "machine load", the run's own tables) say so.
BUSY_LOAD = 0.5


def busy_load(environment: Any) -> float | None:
    """The 1-minute load per CPU a run's environment recorded when it began (its power facts),
    where it was at least BUSY_LOAD: the machine was busy and the run's figures are not reliable;
    None where it was quieter or nothing was recorded."""
    power = environment.get("power") if isinstance(environment, dict) else None
    fact = power.get("load_per_cpu") if isinstance(power, dict) else None
    load = fact.get("value") if isinstance(fact, dict) else None
    if not isinstance(load, int | float) or isinstance(load, bool) or load < BUSY_LOAD:
        return None
    return float(load)


def load_per_cpu() -> Fact:
    """The 1-minute load average per logical CPU when the run started: other work on the machine
    moves results as much as the power state does (a load change between two runs once turned a
    planted 10% slowdown into a "1.21x faster" here; docs/performance.md)."""
    if not hasattr(os, "getloadavg"):
        return _na("the OS reports no load average")
    return _value(round(os.getloadavg()[0] / (os.cpu_count() or 1), 2))


def power_state() -> dict[str, Fact]:
    return {
        "load_per_cpu": load_per_cpu(),
        "power_source": on_ac_power(),
        "cpu_governor": cpu_governor(),
        "energy_performance_preference": energy_performance_preference(),
        "macos_power_mode": macos_power_mode(),
        "gpu_power_limit_w": gpu_power_limits(),
    }


def describe_fact(fact: Any) -> str:
    if isinstance(fact, dict) and "value" in fact:
        value = fact["value"]
        if isinstance(value, dict):
            return ", ".join(f"{k}={v}" for k, v in value.items())
        return str(value)
    return "n/a"


def power_differences(env_a: dict[str, Any], env_b: dict[str, Any]) -> str:
    """"power source AC vs battery (40%); cpu governor performance vs powersave", or "".

    Only facts both runs state are compared: "n/a" against a value is a missing reading, not a
    difference in the machine."""
    a, b = env_a.get("power") or {}, env_b.get("power") or {}
    if not isinstance(a, dict) or not isinstance(b, dict):
        return ""
    notes = []
    for name in dict.fromkeys([*a, *b]):
        fact_a, fact_b = a.get(name), b.get(name)
        if not (isinstance(fact_a, dict) and "value" in fact_a
                and isinstance(fact_b, dict) and "value" in fact_b):
            continue  # both runs must state the fact
        if name == "load_per_cpu":
            # The load always differs a little; only a change of half a busy CPU per CPU matters.
            if _load_differs(fact_a["value"], fact_b["value"]):
                notes.append(f"load per CPU {fact_a['value']} vs {fact_b['value']}")
        elif fact_a["value"] != fact_b["value"]:
            notes.append(f"{name.replace('_', ' ')} {describe_fact(fact_a)} vs {describe_fact(fact_b)}")
    return "; ".join(notes)


LOAD_DIFFERENCE = 0.5


def _load_differs(a: Any, b: Any) -> bool:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    return numbers and abs(a - b) >= LOAD_DIFFERENCE
