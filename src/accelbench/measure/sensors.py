"""CPU and device frequency and temperature, read around the measured steps (thermal drift)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from accelbench.devices import Device


def cpu_sensors() -> dict[str, Any]:
    """What psutil can read here: current CPU frequency (MHz) and the hottest CPU sensor (°C)."""
    facts: dict[str, Any] = {}
    try:
        frequency = psutil.cpu_freq()
    except (OSError, NotImplementedError, FileNotFoundError):
        frequency = None
    if frequency is not None and frequency.current:
        facts["cpu_mhz"] = round(frequency.current, 1)
    read_temperatures = getattr(psutil, "sensors_temperatures", None)  # absent on macOS/Windows
    if read_temperatures is not None:
        try:
            temperatures = read_temperatures()
        except (OSError, RuntimeError):
            temperatures = {}
        readings = [entry.current for entries in temperatures.values() for entry in entries
                    if entry.current]
        if readings:
            facts["cpu_max_temperature_c"] = max(readings)
    return facts


def case_sensors(device: Device) -> dict[str, Any]:
    """The CPU's readings and the device's own (GPU temperature and SM clock through NVML, found
    by UUID so CUDA_VISIBLE_DEVICES is honoured). Read it after warm-up and after the measured
    steps: a reading taken at idle, before any work, says nothing about throttling."""
    return {**cpu_sensors(), **device.sensors()}
