"""The sustained measurement: a case (or a peak) run for minutes, its throughput per interval,
with the device's sensors read over the same intervals.

The ordinary measurement is a burst: about 10 s after warm-up. A laptop, or an accelerator at its
power or thermal limit, does not hold its burst; mamf-finder publishes burst and sustained
matrix-product peaks apart for that reason (its MSMF). Here the work runs for ``duration_s``,
split into intervals of ``interval_s``; each interval records the steps it ran and the seconds
they took, timed to the synchronisation at its end, and a reading of the sensors (clock,
temperature, power) taken between intervals, outside the timed time. The burst, the sustained
rate, their ratio and the verdict are figures over this series (``results/sustained.py``).

A sensor that cannot be read is "n/a" with the reason (no NVML, RAPL readable only by root,
powermetrics needing root, a VM hiding the CPU's frequency), never a missing key or a 0.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.measure.energy import EnergyMeter, energy_meter_for
from accelbench.measure.sensors import case_sensors, cpu_sensors
from accelbench.options import DEFAULT_SUSTAINED_INTERVAL_S

if TYPE_CHECKING:
    import torch

    from accelbench.devices import Device
    from accelbench.devices.numerics import Precision

#: The default interval (``--sustained-interval``; tests use a fraction of a second).
DEFAULT_INTERVAL_S = DEFAULT_SUSTAINED_INTERVAL_S
#: The sensors every series names, whether or not they can be read here.
SENSORS = ("clock_mhz", "temperature_c", "power_w")

#: A step (or window of steps) run synchronised: returns the units of work it did (steps for a
#: case, FLOP or bytes for a peak); None counts as one step.
Work = Callable[[], "float | int | None"]
Progress = Callable[[float, float], None]


@dataclass(frozen=True)
class Reading:
    """One sensor read once: a value, or None and the reason ("n/a: ..."), and the limit the
    sensor is held to where the device says it (a temperature's slowdown point, a power cap)."""

    value: float | None
    na: str = ""
    limit: float | None = None

    @classmethod
    def missing(cls, reason: str) -> Reading:
        return cls(None, reason if reason.startswith("n/a") else f"n/a: {reason}")


class SensorReader(Protocol):
    """Read over each interval: ``begin`` just before it, ``read`` right after it (a power reading
    is the interval's mean, a clock or temperature the value at its end)."""

    def begin(self) -> None: ...

    def read(self) -> dict[str, Reading]: ...


@dataclass
class SensorSeries:
    """One sensor over the run: a value per interval (None where it could not be read)."""

    values: list[float | None] = field(default_factory=list)
    #: Why it could not be read ("n/a: ..."), the last reason given; "" when it always was.
    na: str = ""
    limit: float | None = None

    def add(self, reading: Reading | None) -> None:
        if reading is None:
            reading = Reading.missing("the reader gave no such sensor")
        self.values.append(reading.value)
        if reading.value is None:
            self.na = reading.na or "n/a: not read"
        if reading.limit is not None:
            self.limit = reading.limit

    @property
    def readable(self) -> bool:
        return any(value is not None for value in self.values)

    def to_dict(self) -> dict[str, Any]:
        return {"values": list(self.values), "na": self.na, "limit": self.limit}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SensorSeries:
        return cls(list(data.get("values", [])), str(data.get("na", "")), data.get("limit"))


@dataclass
class SustainedSeries:
    """The time series of a sustained run: per interval, the work done and the seconds it took,
    and each sensor's reading."""

    interval_s: float
    duration_s: float
    #: What the work is counted in: "steps" for a case, "FLOP" or "bytes" for a peak.
    unit: str = "steps"
    work: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    #: Seconds from the run's start to each interval's end (its place on the time axis).
    ends: list[float] = field(default_factory=list)
    sensors: dict[str, SensorSeries] = field(default_factory=lambda: {n: SensorSeries() for n in SENSORS})

    @property
    def rates(self) -> list[float]:
        """Throughput per interval (units per second)."""
        return [w / s for w, s in zip(self.work, self.seconds, strict=True) if s > 0]

    def to_dict(self) -> dict[str, Any]:
        return {"interval_s": self.interval_s, "duration_s": self.duration_s, "unit": self.unit,
                "work": list(self.work), "seconds": list(self.seconds), "ends": list(self.ends),
                "sensors": {name: series.to_dict() for name, series in self.sensors.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SustainedSeries:
        return cls(float(data["interval_s"]), float(data["duration_s"]), str(data.get("unit", "steps")),
                   [float(v) for v in data.get("work", [])], [float(v) for v in data.get("seconds", [])],
                   [float(v) for v in data.get("ends", [])],
                   {name: SensorSeries.from_dict(series)
                    for name, series in (data.get("sensors") or {}).items()})


def run_sustained(work: Work, duration_s: float, interval_s: float = DEFAULT_INTERVAL_S,
                  sensors: SensorReader | None = None, unit: str = "steps",
                  progress: Progress | None = None,
                  clock: Callable[[], float] = time.perf_counter) -> SustainedSeries:
    """Run ``work`` (synchronised: it returns when the device is done) back to back for
    ``duration_s`` seconds of timed work, in intervals of at least ``interval_s`` (an interval
    ends with the first call that reaches it, so a step longer than the interval is one whole
    interval). The sensors are read between intervals, outside the timed seconds."""
    series = SustainedSeries(interval_s, duration_s, unit)
    elapsed = 0.0
    while elapsed < duration_s:
        if sensors is not None:
            sensors.begin()
        done, start = 0.0, clock()
        now = start
        while now - start < interval_s:
            units = work()
            done += 1.0 if units is None else float(units)
            now = clock()
        seconds = now - start
        elapsed += seconds
        series.work.append(done)
        series.seconds.append(seconds)
        series.ends.append(elapsed)
        readings = sensors.read() if sensors is not None else {}
        for name in dict.fromkeys([*SENSORS, *readings]):
            series.sensors.setdefault(name, SensorSeries()).add(
                readings.get(name) if sensors is not None else Reading.missing("no sensor reader given"))
        if progress is not None:
            progress(min(elapsed, duration_s), duration_s)
    return series


# --- the default reader: the CPU's or the device's own sensors, and its energy meter -------------
#: The keys ``Device.sensors()`` (NVML) and ``measure/sensors.cpu_sensors`` give, by sensor:
#: an accelerator's own, or the CPU's when the device is the CPU (never the CPU's for an
#: accelerator, though ``case_sensors`` holds both).
_CLOCK_KEYS = {"device": ("gpu_sm_clock_mhz",), "cpu": ("cpu_mhz",)}
_TEMPERATURE_KEYS = {"device": ("gpu_temperature_c",), "cpu": ("cpu_max_temperature_c",)}


class DeviceSensors:
    """Clock and temperature from the device's own sensors (NVML on NVIDIA GPUs), or the CPU's
    (psutil) when the device is the CPU; power as the mean over each interval from the device's
    energy meter (NVML, RAPL, or powermetrics where ``sudo -n`` runs it without a password).
    Never the CPU's clock for an accelerator: it would name a cause that is not the device's."""

    def __init__(self, device: Device, meter: EnergyMeter | None = None,
                 read: Callable[[], dict[str, Any]] | None = None) -> None:
        self.device = device
        self.meter = meter if meter is not None else energy_meter_for(device)
        self._read = read or ((lambda: cpu_sensors()) if device.is_cpu else (lambda: case_sensors(device)))
        self._limits: dict[str, float | None] | None = None

    def begin(self) -> None:
        self.meter.start()

    def read(self) -> dict[str, Reading]:
        reading = self.meter.stop()
        try:
            facts = dict(self._read())
        except Exception as error:  # a sensor never fails the run it watches
            facts = {"error": f"{type(error).__name__}: {error}"}
        limits = self.limits()
        side = "cpu" if self.device.is_cpu else "device"
        power = (Reading(reading.joules / reading.seconds, limit=limits["power_w"])
                 if reading.joules is not None and reading.seconds > 0
                 else Reading.missing(reading.reason or f"{reading.source}: no reading"))
        return {"clock_mhz": self._pick(facts, _CLOCK_KEYS[side], "clock", None),
                "temperature_c": self._pick(facts, _TEMPERATURE_KEYS[side], "temperature",
                                            limits["temperature_c"]),
                "power_w": power}

    def _pick(self, facts: dict[str, Any], keys: tuple[str, ...], what: str,
              limit: float | None) -> Reading:
        for key in keys:
            if isinstance(facts.get(key), int | float):
                return Reading(float(facts[key]), limit=limit)
        if facts.get("error"):
            return Reading.missing(str(facts["error"]))
        if self.device.is_cpu:
            return Reading.missing(f"psutil reads no CPU {what} here (a VM, a container, or an OS "
                                   "that does not expose it)")
        return Reading.missing(f"{self.device.name} reports no {what} (only NVIDIA GPUs do, "
                               "through NVML with nvidia-ml-py installed)")

    def limits(self) -> dict[str, float | None]:
        """The temperature and power the device is held to, read once: the CPU sensors' "high"
        mark, NVML's slowdown temperature and enforced power limit; None where not said."""
        if self._limits is None:
            self._limits = {"temperature_c": None, "power_w": None}
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
    from accelbench.devices.nvml import NvmlUnavailable, nvml_device

    if "gpu_temperature_c" not in case_sensors(device):
        return {}  # not a device NVML reads
    try:
        with nvml_device(device.index) as (pynvml, target):
            board = target.board
            slowdown = pynvml.nvmlDeviceGetTemperatureThreshold(
                board, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
            watts = pynvml.nvmlDeviceGetEnforcedPowerLimit(board) / 1000.0
    except NvmlUnavailable:
        return {}
    return {"temperature_c": float(slowdown), "power_w": float(watts)}


# --- sustained peaks (the MSMF of mamf-finder) ---------------------------------------------------
def matmul_work(device: Device, precision: Precision | torch.dtype | str) -> Work:
    """A window of square products, sized as the burst peak sizes it (``time_matmul``'s side and
    products per synchronisation); it returns the FLOP it did."""
    import torch

    from accelbench.devices.numerics import precision_settings
    from accelbench.measure.peak import _operands, product_precision, time_matmul

    timing = time_matmul(device, precision, repeats=1)
    p = product_precision(precision)
    a, b = _operands(device, p, timing.side)
    count, flop = timing.products_per_sync, 2.0 * timing.side ** 3 * timing.products_per_sync

    def window() -> float:
        with precision_settings(p, device):
            for _ in range(count):
                torch.mm(a, b)
            device.synchronize()
        return flop

    return window


def copy_work(device: Device, buffer_bytes: int | None = None) -> Work:
    """A window of device-to-device copies, as many per synchronisation as the bandwidth figure
    queues; it returns the bytes moved (each byte read once and written once)."""
    import torch

    from accelbench.measure.bandwidth import BANDWIDTH_BUFFER_BYTES, time_memory_copy

    size = buffer_bytes or BANDWIDTH_BUFFER_BYTES
    count = time_memory_copy(device, size, repeats=1).copies_per_sync
    source = torch.ones(size // 4, device=device.torch_device)
    target = torch.empty_like(source)
    moved = 2.0 * source.numel() * 4 * count

    def window() -> float:
        for _ in range(count):
            target.copy_(source)
        device.synchronize()
        return moved

    return window


def run_sustained_peak(work: Work, unit: str, duration_s: float,
                       interval_s: float = DEFAULT_INTERVAL_S,
                       sensors: SensorReader | None = None,
                       progress: Progress | None = None) -> SustainedSeries:
    """A peak held for ``duration_s``: ``work`` is :func:`matmul_work` (unit "FLOP") or
    :func:`copy_work` ("bytes"), run back to back; each interval's rate is FLOP/s or bytes/s."""
    work()  # first use: kernel choice, allocation, before the first timed interval
    return run_sustained(work, duration_s, interval_s, sensors, unit=unit, progress=progress)


def hold_peaks(device: Device, duration_s: float, interval_s: float = DEFAULT_INTERVAL_S,
               precisions: tuple[str, ...] = ("fp32",), sensors: SensorReader | None = None,
               progress: Callable[[str, float, float], None] | None = None) -> dict[str, SustainedSeries]:
    """``roofline --sustained``: each matrix-product peak of ``precisions`` and the bandwidth
    held for ``duration_s``, one after the other, keyed as the roofline's figures
    ("matmul_fp32", "bandwidth"). A precision the device cannot run is left out (the roofline
    says why); the device's sensors are read per interval unless ``sensors`` is given."""
    from accelbench.devices.numerics import get_precision, unsupported_reason

    reader = sensors if sensors is not None else DeviceSensors(device)
    works: dict[str, tuple[Callable[[], Work], str]] = {}
    for name in precisions:
        if not unsupported_reason(device, get_precision(name)):
            works[f"matmul_{name}"] = ((lambda name=name: matmul_work(device, name)), "FLOP")
    works["bandwidth"] = ((lambda: copy_work(device)), "bytes")
    held = {}
    for figure, (make, unit) in works.items():
        report = (lambda done, total, figure=figure: progress(figure, done, total)) if progress else None
        held[figure] = run_sustained_peak(make(), unit, duration_s, interval_s, reader, report)
    return held
