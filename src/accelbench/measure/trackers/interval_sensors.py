"""The sensors of a sustained run, read over each interval *while it runs*.

A clock or temperature read after an interval's closing synchronisation is the idle device's: a
GPU's clock drops within milliseconds of going idle, so such a reading says little about the
work. So :class:`DeviceSensors` samples the device's sensors on a background thread during the
interval (every ``SAMPLE_PERIOD_S`` at most, and at least ``SAMPLES_PER_INTERVAL`` times in an
interval as long as the last one) and reports each interval's mean; the power is the energy
meter's mean over the interval. Beside the numbers, the device's own word for what held its
clock back: NVML's clock-event (throttle) reasons seen during the interval, or on a Mac the
thermal pressure that the powermetrics call measuring the power printed (``EVENTS``).

A sensor that cannot be read is "n/a" with the reason (no NVML, RAPL readable only by root,
powermetrics needing root, a VM's fixed CPU frequency), never a missing key or a 0.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.measure.trackers.energy import EnergyMeter, energy_meter_for
from accelbench.measure.trackers.sensors import cpu_sensors

if TYPE_CHECKING:
    from accelbench.devices import Device

#: The entry of a reading that holds the interval's clock events (words), not a number.
EVENTS = "clock_events"
#: Sample at most this often, and about this many times an interval.
SAMPLE_PERIOD_S = 0.25
SAMPLES_PER_INTERVAL = 4
MIN_SAMPLE_PERIOD_S = 0.02


@dataclass(frozen=True)
class Reading:
    """One sensor over one interval: a value, or None and the reason ("n/a: ..."), and the limit
    the sensor is held to where the device says it (a temperature's slowdown point, a power
    cap). The ``EVENTS`` entry carries words instead of a value: what the device said held its
    clock back during the interval (none: an empty tuple)."""

    value: float | None
    na: str = ""
    limit: float | None = None
    events: tuple[str, ...] = ()

    @classmethod
    def missing(cls, reason: str) -> Reading:
        return cls(None, reason if reason.startswith("n/a") else f"n/a: {reason}")


class SensorReader(Protocol):
    """Read over each interval: ``begin`` just before it, ``read`` right after it."""

    def begin(self) -> None: ...

    def read(self) -> dict[str, Reading]: ...


class IntervalSampler:
    """``read()`` on a background thread every ``period_s`` from ``start`` to ``stop``: the
    readings taken while the interval ran (the first one a period after its start)."""

    def __init__(self, read: Callable[[], dict[str, Any]]) -> None:
        self._read = read
        self._samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, period_s: float) -> None:
        self._samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, args=(period_s,), daemon=True)
        self._thread.start()

    def _loop(self, period_s: float) -> None:
        while not self._stop.wait(period_s):
            try:
                self._samples.append(dict(self._read()))
            except Exception as error:  # a sensor never fails the run it watches
                self._samples.append({"error": f"{type(error).__name__}: {error}"})

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self._samples


#: The keys ``Device.sensors()`` (NVML), the energy meter's conditions (powermetrics) and
#: ``measure/sensors.cpu_sensors`` give, by sensor: an accelerator's own, or the CPU's when the
#: device is the CPU (never the CPU's for an accelerator: it would name a cause that is not the
#: device's).
_CLOCK_KEYS = {"device": ("gpu_sm_clock_mhz", "gpu_active_mhz"), "cpu": ("cpu_mhz",)}
_TEMPERATURE_KEYS = {"device": ("gpu_temperature_c",), "cpu": ("cpu_max_temperature_c",)}
_MEMORY_TEMPERATURE_KEY = "gpu_memory_temperature_c"
_EVENTS_KEY = "gpu_clock_events"


def mean_facts(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One interval's samples as one: each number's mean, the clock events seen in any sample
    (in the order first seen), and the last reason a key gave for not being read."""
    facts: dict[str, Any] = {}
    numbers: dict[str, list[float]] = {}
    events: dict[str, None] = {}
    for sample in samples:
        for key, value in sample.items():
            if key == _EVENTS_KEY and isinstance(value, list):
                events.update(dict.fromkeys(value))
                facts[key] = []
            elif isinstance(value, int | float) and not isinstance(value, bool):
                numbers.setdefault(key, []).append(float(value))
            else:
                facts[key] = value
    if _EVENTS_KEY in facts:
        facts[_EVENTS_KEY] = list(events)
    facts.update({key: statistics.fmean(values) for key, values in numbers.items()})
    return facts


class DeviceSensors:
    """Clock and temperature from the device's own sensors (NVML on NVIDIA GPUs, the GPU clock
    of powermetrics on a Mac), or the CPU's (psutil) when the device is the CPU, sampled during
    each interval; power as the mean over each interval from the device's energy meter (NVML,
    RAPL, or powermetrics where ``sudo -n`` runs it without a password). For an accelerator also
    its memory temperature and its clock events, each a value or a reason."""

    def __init__(self, device: Device, meter: EnergyMeter | None = None,
                 read: Callable[[], dict[str, Any]] | None = None,
                 period_s: float = SAMPLE_PERIOD_S) -> None:
        self.device = device
        self.meter = meter if meter is not None else energy_meter_for(device)
        self._read = read or ((lambda: cpu_sensors()) if device.is_cpu else device.sensors)
        self._sampler = IntervalSampler(self._read)
        self._period = period_s
        self._limits: dict[str, float | None] | None = None

    def begin(self) -> None:
        self.meter.start()
        self._sampler.start(self._period)

    def read(self) -> dict[str, Reading]:
        samples = self._sampler.stop()
        reading = self.meter.stop()
        if not samples:  # an interval shorter than a sample period: read it once, now
            with contextlib.suppress(Exception):
                samples = [dict(self._read())]
        # The next interval (as long as this one, about) gets its share of samples.
        self._period = min(SAMPLE_PERIOD_S, max(MIN_SAMPLE_PERIOD_S,
                                                reading.seconds / SAMPLES_PER_INTERVAL))
        facts = {**mean_facts(samples), **reading.conditions}
        limits = self.limits()
        side = "cpu" if self.device.is_cpu else "device"
        power = (Reading(reading.joules / reading.seconds, limit=limits["power_w"])
                 if reading.joules is not None and reading.seconds > 0
                 else Reading.missing(reading.reason or f"{reading.source}: no reading"))
        readings = {"clock_mhz": self._pick(facts, _CLOCK_KEYS[side], "clock", None),
                    "temperature_c": self._pick(facts, _TEMPERATURE_KEYS[side], "temperature",
                                                limits["temperature_c"]),
                    "power_w": power}
        if not self.device.is_cpu:
            readings["memory_temperature_c"] = self._pick(
                facts, (_MEMORY_TEMPERATURE_KEY,), "memory temperature",
                limits.get("memory_temperature_c"))
            readings[EVENTS] = self._events(facts)
        return readings

    def _pick(self, facts: dict[str, Any], keys: tuple[str, ...], what: str,
              limit: float | None) -> Reading:
        for key in keys:
            if isinstance(facts.get(key), int | float):
                return Reading(float(facts[key]), limit=limit)
        for key in keys:  # the sensor's own reason ("not readable here: ...")
            if isinstance(facts.get(f"{key}_na"), str):
                return Reading.missing(facts[f"{key}_na"])
        if facts.get("error"):
            return Reading.missing(str(facts["error"]))
        if self.device.is_cpu:
            return Reading.missing(f"psutil reads no CPU {what} here (a VM, a container, or an OS "
                                   "that does not expose it)")
        return Reading.missing(f"{self.device.name} reports no {what} (only NVIDIA GPUs do, "
                               "through NVML with nvidia-ml-py installed)")

    def _events(self, facts: dict[str, Any]) -> Reading:
        """NVML's clock-event reasons seen during the interval, and a Mac's thermal pressure
        above nominal; a reason where the device gives neither."""
        words: list[str] = []
        known = False
        if isinstance(facts.get(_EVENTS_KEY), list):
            known, words = True, [str(word) for word in facts[_EVENTS_KEY]]
        pressure = facts.get("thermal_pressure")
        if isinstance(pressure, str):
            known = True
            if pressure != "Nominal":
                words.append(f"thermal pressure {pressure}")
        if known:
            return Reading(None, events=tuple(words))
        return Reading.missing(f"{self.device.name} gives no clock-event reasons (NVIDIA GPUs do "
                               "through NVML, a Mac its thermal pressure through powermetrics)")

    def limits(self) -> dict[str, float | None]:
        """The temperatures and power the device is held to, read once: the CPU sensors' "high"
        mark, NVML's slowdown and memory temperatures and enforced power limit; None where not
        said."""
        if self._limits is None:
            self._limits = {"temperature_c": None, "power_w": None, "memory_temperature_c": None}
            # A limit the device does not state (or fails to) is None, not a failure.
            with contextlib.suppress(Exception):
                self._limits.update(_cpu_limits() if self.device.is_cpu else _nvml_limits(self.device))
        return self._limits


def _cpu_limits() -> dict[str, float | None]:
    import psutil

    read = getattr(psutil, "sensors_temperatures", None)  # absent on macOS and Windows
    entries = [entry for group in (read() if read else {}).values() for entry in group if entry.current]
    hottest = max(entries, key=lambda entry: entry.current, default=None)
    return {"temperature_c": (hottest.high or hottest.critical or None) if hottest else None}


def _nvml_limits(device: Device) -> dict[str, float | None]:
    from accelbench.devices.nvml import THRESHOLD_MEMORY_MAX, NvmlUnavailable, nvml_device

    if "gpu_temperature_c" not in device.sensors():
        return {}  # not a device NVML reads
    try:
        with nvml_device(device.index) as (pynvml, target):
            board = target.board
            slowdown = pynvml.nvmlDeviceGetTemperatureThreshold(
                board, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
            watts = pynvml.nvmlDeviceGetEnforcedPowerLimit(board) / 1000.0
            memory = None
            with contextlib.suppress(pynvml.NVMLError):
                memory = float(pynvml.nvmlDeviceGetTemperatureThreshold(board, getattr(
                    pynvml, "NVML_TEMPERATURE_THRESHOLD_MEM_MAX", THRESHOLD_MEMORY_MAX)))
    except NvmlUnavailable:
        return {}
    return {"temperature_c": float(slowdown), "power_w": float(watts),
            "memory_temperature_c": memory or None}
