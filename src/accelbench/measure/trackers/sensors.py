"""CPU and device frequency and temperature, read around the measured steps (thermal drift)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psutil

from accelbench.devices.cpuinfo import cpu_clock_unreadable

if TYPE_CHECKING:
    from accelbench.devices import Device

#: The prefix of a sensor that this machine does not let us read live (``cpu_mhz_na``).
NOT_READABLE = "not readable here: "


def cpu_sensors(clock_unreadable: Callable[[], str] = cpu_clock_unreadable) -> dict[str, Any]:
    """What psutil can read here: current CPU frequency (MHz) and the hottest CPU sensor (°C).
    A frequency that is not a live reading (a VM's fixed /proc/cpuinfo figure, macOS's nominal
    one: ``clock_unreadable``) is no reading: ``cpu_mhz_na`` says why instead."""
    facts: dict[str, Any] = {}
    unreadable = clock_unreadable()
    try:
        frequency = None if unreadable else psutil.cpu_freq()
    except (OSError, NotImplementedError, FileNotFoundError):
        frequency = None
    if unreadable:
        facts["cpu_mhz_na"] = NOT_READABLE + unreadable
    elif frequency is not None and frequency.current:
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
