"""Energy of the measured steps, read from the sensors a device has: NVML, RAPL or powermetrics.

Contract with the runner (through ``trackers.EnergyTracker``, which the timed loop enters)
------------------------------------------------------------------------------------------
::

    meter = energy_meter_for(case.device)   # never raises; sources come from the device adapter
    meter.prepare()                          # optional, before warm-up: probing the sources
                                             # (NVML init, a powermetrics sample) costs up to ~1 s
    meter.start()                            # just before the first measured step
    ...                                      # the measured steps (the device synchronised after),
                                             # for at least meter.min_seconds where possible
    reading = meter.stop()                   # EnergyReading: joules or None, source, reason
    result.energy = Energy.from_dict(reading.figures(window_steps, result.steps_per_epoch,
                                                     result.batch_size))

A generation case opens the same meter around its timed rounds only (``measure_generation``'s
``timed`` bracket: not the warm-up, not the one-token byte count) and stores
``reading.generation_figures(rounds, batch x new tokens)``: ``joules_per_round`` and
``joules_per_token`` in place of the step figures.

``figures`` gives ``{"source", "reason", "seconds", "method", "resolution", "estimated",
"joules", "joules_per_step", "joules_per_epoch", "samples_per_joule"}``; the numbers are None when
nothing could be read, and ``reason`` says why (not installed, not permitted, no such sensor, a
window too short for the sensor). A meter never fails a case, and never reports 0 J: a counter
that did not advance measured nothing.

``method`` says how the joules were obtained (an energy counter's difference, or sampled power
times the interval), ``resolution`` the sensor's granularity, and ``estimated`` is True when the
figure is not the sensor's own measurement of the window (see ``energy_nvml``: a window shorter
than the NVML counter can resolve is estimated from power x time, as Zeus does).

What the numbers mean
---------------------
Every source measures a whole device over the wall-clock interval between ``start`` and
``stop``: the GPU board (NVML), the CPU packages (RAPL, all sockets summed; DRAM and the rest of the
machine are not included), or the Apple SoC's CPU and GPU (powermetrics). Idle power and any other
process on that device are included; nothing is attributed to this process alone. RAPL counters
wrap at ``max_energy_range_uj``; one wrap per interval is corrected, so a single interval must be
shorter than a full counter range (about 17 minutes at 250 W for the common 262 kJ range).
Power-sampling sources (powermetrics, NVML on GPUs without an energy counter) report the mean
sampled power times the interval, so they need an interval of a few sampling periods.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.measure.trackers.energy_source import EnergySource, EnergyUnavailable

if TYPE_CHECKING:
    from accelbench.devices import Device

POWERCAP = Path("/sys/class/powercap")


@dataclass(frozen=True)
class EnergyReading:
    joules: float | None
    source: str
    reason: str = ""
    seconds: float = 0.0
    method: str = ""
    resolution: str = ""
    estimated: bool = False
    #: What the source said besides the energy over the window (``EnergySource.conditions``).
    conditions: dict[str, Any] = field(default_factory=dict)

    def figures(self, measured_steps: int, steps_per_epoch: int, batch_size: int) -> dict[str, Any]:
        return {**self._described(),
                **energy_figures(self.joules, measured_steps, steps_per_epoch, batch_size)}

    def generation_figures(self, rounds: int, tokens_per_round: int) -> dict[str, Any]:
        """A generation case's: the window held its ``rounds`` timed rounds, each of
        ``tokens_per_round`` output tokens (B x N)."""
        return {**self._described(), **generation_energy_figures(self.joules, rounds, tokens_per_round)}

    def _described(self) -> dict[str, Any]:
        return {"source": self.source, "reason": self.reason, "seconds": self.seconds,
                "method": self.method, "resolution": self.resolution, "estimated": self.estimated}


def energy_figures(joules: float | None, measured_steps: int, steps_per_epoch: int,
                   batch_size: int) -> dict[str, float | None]:
    """Energy per step and per epoch, and samples per joule; None where it cannot be derived."""
    per_step = joules / measured_steps if joules is not None and measured_steps > 0 else None
    return {
        "joules": joules,
        "joules_per_step": per_step,
        "joules_per_epoch": per_step * steps_per_epoch if per_step is not None and steps_per_epoch
        else None,
        "samples_per_joule": measured_steps * batch_size / joules if joules else None,
    }


def generation_energy_figures(joules: float | None, rounds: int,
                              tokens_per_round: int) -> dict[str, float | None]:
    """Energy per timed round (one whole generation: prefill and its decode steps) and per output
    token (the rounds' B x N tokens, so the prefill's energy is shared among them); None where it
    cannot be derived."""
    tokens = rounds * tokens_per_round
    return {"joules": joules,
            "joules_per_round": joules / rounds if joules is not None and rounds > 0 else None,
            "joules_per_token": joules / tokens if joules is not None and tokens > 0 else None}


# --- RAPL (Intel and AMD CPUs on Linux) ----------------------------------------------------------
_PACKAGE_DOMAIN = re.compile(r"^intel-rapl:\d+$")  # intel-rapl:N:M are sub-domains (core, dram)


class RaplSource(EnergySource):
    name = "rapl"
    method = "energy counter difference (RAPL energy_uj)"
    resolution = "counter in µJ, updated about every 1 ms"

    def __init__(self, root: Path = POWERCAP) -> None:
        self.root = root
        self._start: dict[Path, int] = {}

    def _packages(self) -> list[Path]:
        if not self.root.is_dir():
            raise EnergyUnavailable(f"no RAPL interface ({self.root} is missing: not Linux on an "
                                    "Intel or AMD CPU, or a VM/container that hides it)")
        # Top-level domains also include "psys" (the whole platform) on some laptops; only the
        # packages are summed, so nothing is counted twice.
        packages = [d for d in sorted(self.root.iterdir()) if _PACKAGE_DOMAIN.match(d.name)
                    and _read(d / "name").startswith("package")]
        if not packages:
            raise EnergyUnavailable(f"no RAPL package domain under {self.root}")
        return packages

    def _counters(self) -> dict[Path, int]:
        return {domain: int(_read(domain / "energy_uj")) for domain in self._packages()}

    def available(self) -> tuple[bool, str]:
        try:
            self._counters()
        except EnergyUnavailable as error:
            return False, str(error)
        return True, ""

    def start(self) -> None:
        self._start = self._counters()

    def stop(self) -> float:
        total_uj = 0
        for domain, end in self._counters().items():
            begin = self._start[domain]
            if end < begin:  # the counter wrapped at its range
                end += int(_read(domain / "max_energy_range_uj"))
            total_uj += end - begin
        return total_uj / 1e6


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except PermissionError:
        # Linux >= 5.10 made energy_uj root-only (CVE-2020-8694, the "Platypus" side channel).
        raise EnergyUnavailable(f"{path} is readable only by root; run as root or grant read "
                                f"access (sudo chmod a+r {path.parent}/energy_uj)") from None
    except (OSError, ValueError) as error:
        raise EnergyUnavailable(f"cannot read {path}: {error}") from None


# --- choosing sources for a device --------------------------------------------------------------
_SOURCES: dict[str, Callable[[Device], EnergySource]] = {
    "rapl": lambda device: RaplSource(),
    "nvml": lambda device: _nvml_source(device),
    "powermetrics-cpu": lambda device: _powermetrics_source(("CPU",)),
    "powermetrics-cpu-gpu": lambda device: _powermetrics_source(("CPU", "GPU")),
}


def _powermetrics_source(parts: tuple[str, ...]) -> EnergySource:
    from accelbench.measure.trackers.energy_powermetrics import PowermetricsSource  # its own module

    return PowermetricsSource(parts)


def _nvml_source(device: Device) -> EnergySource:
    from accelbench.measure.trackers.energy_nvml import NvmlSource  # its own module: NVML's details

    return NvmlSource(device.index)


class EnergyMeter:
    """Reads the first available of ``sources`` around the measured steps."""

    def __init__(self, sources: Sequence[EnergySource]) -> None:
        self.sources = list(sources)
        self._chosen: EnergySource | None = None
        self._reasons: list[str] | None = None
        self._started = 0.0
        self._failure = ""

    def prepare(self) -> None:
        if self._reasons is not None:
            return
        self._reasons = []
        for source in self.sources:
            ok, reason = source.available()
            if ok:
                self._chosen = source
                return
            self._reasons.append(f"{source.name}: {reason}")
        if not self.sources:
            self._reasons.append("this device has no known energy sensor")

    def start(self) -> None:
        self.prepare()
        self._failure = ""
        self._started = time.perf_counter()
        if self._chosen is not None:
            try:
                self._chosen.start()
            except Exception as error:  # a sensor never fails the case it measures
                self._failure = _describe(error)

    @property
    def min_seconds(self) -> float:
        """How long the measured window should last for the chosen sensor to resolve it."""
        self.prepare()
        return self._chosen.min_seconds if self._chosen is not None else 0.0

    def stop(self) -> EnergyReading:
        seconds = time.perf_counter() - self._started
        chosen = self._chosen
        if chosen is None:
            return EnergyReading(None, "", "; ".join(self._reasons or []), seconds)
        failed = partial(EnergyReading, None, chosen.name, seconds=seconds, method=chosen.method,
                         resolution=chosen.resolution)
        if self._failure:
            return failed(self._failure)
        try:
            joules = chosen.stop()
        except Exception as error:
            return failed(_describe(error), conditions=dict(chosen.conditions))
        if not math.isfinite(joules) or joules < 0:
            return failed(f"implausible reading {joules} J")
        if joules == 0:  # a counter that did not move measured nothing; 0 J would be a lie
            return failed(f"the sensor did not change over {seconds:.3f} s ({chosen.resolution})")
        return EnergyReading(joules, chosen.name, "", seconds, chosen.method, chosen.resolution,
                             chosen.estimated, dict(chosen.conditions))


def _describe(error: Exception) -> str:
    return str(error) if isinstance(error, EnergyUnavailable) else f"{type(error).__name__}: {error}"


def energy_meter_for(device: Device) -> EnergyMeter:
    """The meter for ``device``: the adapter names its sources, in order of preference."""
    return EnergyMeter([_SOURCES[name](device) for name in device.adapter.energy_sources
                        if name in _SOURCES])
