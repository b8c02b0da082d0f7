"""CPU frequency and temperature, read at the start and end of each case (thermal drift)."""

from __future__ import annotations

from typing import Any

import psutil


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
