"""NVIDIA GPU energy through NVML: the board's total-energy counter, or sampled power.

The counter (``nvmlDeviceGetTotalEnergyConsumption``, Volta and newer) counts millijoules but the
driver updates it only about every 100 ms, so a difference over a window of length T is off by up
to one update's worth of energy: up to 100% for T = 0.1 s, and a window shorter than one update
can read 0 J. As in ml.energy's Zeus (``approx_instant_energy``), a window shorter than
``MIN_COUNTER_WINDOW_S`` (where the quantisation error stays within 5%) is not reported as a
counter difference: its energy is estimated as board power times the window and marked
``estimated``; the meter tells the loop ``min_seconds`` so that it can measure long enough to
avoid the estimate. GPUs without the counter get board power sampled every 100 ms.

The GPU is found through the one torch-index-to-NVML mapping in ``accelbench.devices.nvml``, in
its once-per-process NVML session. A MIG slice has no energy of its own: the board's counter and
power also count the other slices, so a slice's energy is n/a with that reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from accelbench.devices import nvml
from accelbench.measure.trackers.energy_source import EnergySource, EnergyUnavailable, PowerSampler

#: How often the driver updates the energy counter and board power (about; NVIDIA documents
#: neither, and measurements put both near 100 ms on recent GPUs).
NVML_UPDATE_S = 0.1
NVML_SAMPLE_INTERVAL_S = NVML_UPDATE_S
#: 20 updates: the counter difference is then within 5% of the window's energy.
MIN_COUNTER_WINDOW_S = 20 * NVML_UPDATE_S

COUNTER_METHOD = "energy counter difference (nvmlDeviceGetTotalEnergyConsumption)"
COUNTER_RESOLUTION = f"counter in mJ, updated about every {NVML_UPDATE_S * 1000:.0f} ms"
ESTIMATE_METHOD = (f"board power x window (estimate: a window under {MIN_COUNTER_WINDOW_S:g} s is "
                   "too short for the energy counter)")
SAMPLING_METHOD = "board power sampled x interval (nvmlDeviceGetPowerUsage; GPU has no counter)"


class NvmlSource(EnergySource):
    """The GPU's total-energy counter (Volta and newer, mJ); on older GPUs, sampled board power."""

    name = "nvml"
    method = COUNTER_METHOD
    resolution = COUNTER_RESOLUTION
    min_seconds = MIN_COUNTER_WINDOW_S

    def __init__(self, index: int, sample_interval_s: float = NVML_SAMPLE_INTERVAL_S,
                 torch_module: Any = None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.index = index
        self._interval = sample_interval_s
        self._torch = torch_module
        self._clock = clock
        self._nvml: Any = None
        self._handle: Any = None
        self._counter = True
        self._start_mj = 0
        self._started = 0.0
        self._sampler: PowerSampler | None = None

    def available(self) -> tuple[bool, str]:
        try:
            pynvml = nvml.nvml_session()  # once per process, left open for start() and stop()
        except nvml.NvmlUnavailable as error:
            return False, str(error)
        try:
            device = nvml.nvml_target(pynvml, self.index, self._torch)
        except (pynvml.NVMLError, nvml.NvmlUnavailable) as error:
            return False, f"NVML: {error}"
        if device.mig:
            return False, (f"cuda:{self.index} is a MIG slice ({device.name}): NVML's energy counter "
                           "and power are the whole GPU's, which the other slices share, so this "
                           "slice's energy cannot be told apart")
        self._handle, self._nvml = device.handle, pynvml
        try:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except pynvml.NVMLError:
            self._counter = False  # pre-Volta GPUs have no counter: integrate power instead
            self.method, self.resolution = SAMPLING_METHOD, (
                f"one power sample every {self._interval * 1000:.0f} ms")
            self.min_seconds = 3 * self._interval
            try:
                pynvml.nvmlDeviceGetPowerUsage(self._handle)
            except pynvml.NVMLError as error:
                return False, f"NVML reads neither energy nor power for GPU {self.index}: {error}"
        return True, ""

    def _watts(self) -> float:
        return int(self._nvml.nvmlDeviceGetPowerUsage(self._handle)) / 1000.0

    def start(self) -> None:
        self.estimated = False
        if self._counter:
            self._start_mj = int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
            self._started = self._clock()
        else:
            self._sampler = PowerSampler(self._watts, self._interval)
            self._sampler.start()

    def stop(self) -> float:
        if self._sampler is not None:
            joules = self._sampler.stop()
            self.estimated = joules is not None and self._sampler.samples < 3
            return joules
        end_mj = int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        seconds = self._clock() - self._started
        if seconds >= MIN_COUNTER_WINDOW_S:
            self.method, self.estimated = COUNTER_METHOD, False
            return (end_mj - self._start_mj) / 1000.0
        # Too short for the counter: the driver's power reading (itself averaged over about
        # the last update) times the window, marked as the estimate it is.
        watts = self._watts()
        if watts <= 0:
            raise EnergyUnavailable(f"window of {seconds:.3f} s is shorter than the "
                                    f"{MIN_COUNTER_WINDOW_S:g} s the NVML counter needs, and "
                                    "NVML read no power to estimate from")
        self.method, self.estimated = ESTIMATE_METHOD, True
        return watts * seconds
