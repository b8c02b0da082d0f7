"""Energy of the measured steps, read from the sensors a device has: NVML, RAPL or powermetrics.

Contract with the runner
------------------------
::

    meter = energy_meter_for(case.device)   # never raises; sources come from the device adapter
    meter.prepare()                          # optional, before warm-up: probing the sources
                                             # (NVML init, a powermetrics sample) costs up to ~1 s
    meter.start()                            # just before the first measured step
    ...                                      # the measured steps (the device synchronised after)
    reading = meter.stop()                   # EnergyReading: joules or None, source, reason
    result.extra["energy"] = reading.figures(result.measured_steps, result.steps_per_epoch,
                                             result.batch_size)

``figures`` gives ``{"source", "reason", "seconds", "joules", "joules_per_step",
"joules_per_epoch", "samples_per_joule"}``; the numbers are None when nothing could be read, and
``reason`` says why (not installed, not permitted, no such sensor). A meter never fails a case.

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

import contextlib
import math
import platform
import re
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.devices import Device

POWERCAP = Path("/sys/class/powercap")
POWERMETRICS_INTERVAL_MS = 500
NVML_SAMPLE_INTERVAL_S = 0.1


class EnergyUnavailable(Exception):
    """A source cannot give a reading; the message is the reason shown to the user."""


@dataclass(frozen=True)
class EnergyReading:
    joules: float | None
    source: str
    reason: str = ""
    seconds: float = 0.0

    def figures(self, measured_steps: int, steps_per_epoch: int, batch_size: int) -> dict[str, Any]:
        return {"source": self.source, "reason": self.reason, "seconds": self.seconds,
                **energy_figures(self.joules, measured_steps, steps_per_epoch, batch_size)}


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


def mean_power_joules(samples: Sequence[tuple[float, float]], seconds: float) -> float:
    """Joules over ``seconds`` from (weight, watts) power samples: the weighted mean power times
    the interval, so an interval that ends between two samples is still fully counted."""
    total_weight = sum(weight for weight, _ in samples)
    if not samples or total_weight <= 0:
        raise EnergyUnavailable(f"no power sample during the {seconds:.2f} s measured")
    return sum(weight * watts for weight, watts in samples) / total_weight * seconds


class EnergySource(ABC):
    name: str = ""

    @abstractmethod
    def available(self) -> tuple[bool, str]:
        """(True, "") when a reading can be taken, else (False, why not and how to fix it)."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> float:
        """Joules since ``start``; raises EnergyUnavailable when the reading failed."""


class PowerSampler:
    """Samples a power reading (watts) on a background thread, for sources with no counter."""

    def __init__(self, read_watts: Callable[[], float], interval_s: float) -> None:
        self._read, self._interval = read_watts, interval_s
        self._samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self._error = ""

    def start(self) -> None:
        self._samples, self._started = [], time.perf_counter()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while True:
                self._samples.append((1.0, self._read()))  # evenly spaced: equal weights
                if self._stop.wait(self._interval):
                    return
        except Exception as error:  # reported by stop(), not lost in this thread
            self._error = f"power reading failed: {type(error).__name__}: {error}"

    def stop(self) -> float:
        seconds = time.perf_counter() - self._started
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._error:
            raise EnergyUnavailable(self._error)
        return mean_power_joules(self._samples, seconds)


# --- RAPL (Intel and AMD CPUs on Linux) ----------------------------------------------------------
_PACKAGE_DOMAIN = re.compile(r"^intel-rapl:\d+$")  # intel-rapl:N:M are sub-domains (core, dram)


class RaplSource(EnergySource):
    name = "rapl"

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


# --- NVML (NVIDIA GPUs) -------------------------------------------------------------------------
class NvmlSource(EnergySource):
    """The GPU's total-energy counter (Volta and newer, mJ); on older GPUs, sampled board power."""

    name = "nvml"

    def __init__(self, index: int, sample_interval_s: float = NVML_SAMPLE_INTERVAL_S) -> None:
        self.index = index
        self._interval = sample_interval_s
        self._nvml: Any = None
        self._handle: Any = None
        self._counter = True
        self._start_mj = 0
        self._sampler: PowerSampler | None = None

    def available(self) -> tuple[bool, str]:
        try:
            import pynvml
        except ImportError:
            return False, ("nvidia-ml-py is not installed (pip install nvidia-ml-py, or the "
                           "'energy' extra)")
        try:
            pynvml.nvmlInit()
            self._handle = _nvml_handle(pynvml, self.index)
        except pynvml.NVMLError as error:
            return False, f"NVML: {error}"
        self._nvml = pynvml
        try:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except pynvml.NVMLError:
            self._counter = False  # pre-Volta GPUs have no counter: integrate power instead
            try:
                pynvml.nvmlDeviceGetPowerUsage(self._handle)
            except pynvml.NVMLError as error:
                return False, f"NVML reads neither energy nor power for GPU {self.index}: {error}"
        return True, ""

    def _milliwatts(self) -> int:
        return int(self._nvml.nvmlDeviceGetPowerUsage(self._handle))

    def start(self) -> None:
        if self._counter:
            self._start_mj = int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        else:
            self._sampler = PowerSampler(lambda: self._milliwatts() / 1000.0, self._interval)
            self._sampler.start()

    def stop(self) -> float:
        if self._sampler is not None:
            return self._sampler.stop()
        end = int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        return (end - self._start_mj) / 1000.0


def _nvml_handle(pynvml: Any, index: int) -> Any:
    """NVML numbers GPUs by PCI bus and ignores CUDA_VISIBLE_DEVICES; torch does neither, so the
    GPU is found by the UUID torch reports for its index where it can be read."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(index).uuid)
    except Exception:  # no torch CUDA context here: fall back to NVML's numbering
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-"))
                                            else f"GPU-{uuid}")


# --- powermetrics (Apple silicon) ---------------------------------------------------------------
_SAMPLE_HEADER = re.compile(r"\*\*\* Sampled system activity .*\(([\d.]+)ms elapsed\) \*\*\*")
_POWER_LINE = re.compile(r"^(CPU|GPU|ANE|Combined) Power(?: \([^)]*\))?:\s*([\d.]+)\s*mW", re.M)


def parse_powermetrics(text: str) -> list[tuple[float, dict[str, float]]]:
    """(seconds, {"CPU": W, "GPU": W, ...}) for each complete sample in powermetrics' output."""
    samples = []
    headers = list(_SAMPLE_HEADER.finditer(text))
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        watts = {m.group(1): float(m.group(2)) / 1000.0
                 for m in _POWER_LINE.finditer(text, header.end(), end)}
        if watts:
            samples.append((float(header.group(1)) / 1000.0, watts))
    return samples


class PowermetricsSource(EnergySource):
    """``sudo -n powermetrics`` sampling ``parts`` (e.g. CPU, or CPU and GPU) over the interval."""

    def __init__(self, parts: tuple[str, ...], popen: Callable[..., Any] = subprocess.Popen,
                 run: Callable[..., Any] = subprocess.run, system: str | None = None) -> None:
        self.parts = parts
        self.name = "powermetrics-" + "-".join(p.lower() for p in parts)
        self._popen, self._run = popen, run
        self._system = system or platform.system()
        self._process: Any = None
        self._started = 0.0

    def _command(self, extra: Sequence[str] = ()) -> list[str]:
        return ["sudo", "-n", "powermetrics", "--samplers", "cpu_power,gpu_power", "-i",
                str(POWERMETRICS_INTERVAL_MS), *extra]

    def available(self) -> tuple[bool, str]:
        if self._system != "Darwin":
            return False, f"powermetrics exists only on macOS; this is {self._system}"
        try:
            probe = self._run(self._command(["-n", "1"]), capture_output=True, text=True,
                              timeout=10, check=False)
        except (OSError, subprocess.SubprocessError) as error:
            return False, f"powermetrics did not run: {error}"
        if probe.returncode != 0:
            said = next((line for line in (probe.stderr or "").splitlines() if line.strip()), "")
            return False, (f"sudo -n powermetrics failed ({said or f'exit code {probe.returncode}'})"
                           "; it needs root: run accelbench with sudo, or allow powermetrics "
                           "without a password in sudoers")
        try:
            self._watts(parse_powermetrics(probe.stdout))
        except EnergyUnavailable as error:
            return False, str(error)
        return True, ""

    def _watts(self, samples: list[tuple[float, dict[str, float]]]) -> list[tuple[float, float]]:
        missing = {part for part in self.parts for _, watts in samples if part not in watts}
        if missing or not samples:
            raise EnergyUnavailable(f"powermetrics printed no {'/'.join(sorted(missing or self.parts))}"
                                    " Power line (Apple silicon only)")
        return [(seconds, sum(watts[part] for part in self.parts)) for seconds, watts in samples]

    def start(self) -> None:
        self._process = self._popen(self._command(), stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
        self._started = time.perf_counter()

    def stop(self) -> float:
        seconds = time.perf_counter() - self._started
        # sudo relays SIGINT to powermetrics, which then prints what it has and exits.
        with contextlib.suppress(ProcessLookupError):
            self._process.send_signal(signal.SIGINT)
        try:
            output, _ = self._process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            output, _ = self._process.communicate()
        return mean_power_joules(self._watts(parse_powermetrics(output or "")), seconds)


# --- choosing sources for a device --------------------------------------------------------------
_SOURCES: dict[str, Callable[[Device], EnergySource]] = {
    "rapl": lambda device: RaplSource(),
    "nvml": lambda device: NvmlSource(device.index),
    "powermetrics-cpu": lambda device: PowermetricsSource(("CPU",)),
    "powermetrics-cpu-gpu": lambda device: PowermetricsSource(("CPU", "GPU")),
}


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

    def stop(self) -> EnergyReading:
        seconds = time.perf_counter() - self._started
        if self._chosen is None:
            return EnergyReading(None, "", "; ".join(self._reasons or []), seconds)
        if self._failure:
            return EnergyReading(None, self._chosen.name, self._failure, seconds)
        try:
            joules = self._chosen.stop()
        except Exception as error:
            return EnergyReading(None, self._chosen.name, _describe(error), seconds)
        if not math.isfinite(joules) or joules < 0:
            return EnergyReading(None, self._chosen.name, f"implausible reading {joules} J", seconds)
        return EnergyReading(joules, self._chosen.name, "", seconds)


def _describe(error: Exception) -> str:
    return str(error) if isinstance(error, EnergyUnavailable) else f"{type(error).__name__}: {error}"


def energy_meter_for(device: Device) -> EnergyMeter:
    """The meter for ``device``: the adapter names its sources, in order of preference."""
    return EnergyMeter([_SOURCES[name](device) for name in device.adapter.energy_sources
                        if name in _SOURCES])
