"""What every energy source is (``EnergySource``), the error that says why one cannot read, and
the power sampling the sources without an energy counter share (NVML on older GPUs,
powermetrics): below ``energy.py``, which picks a device's sources, and beside the sources in
their own modules (``energy_nvml.py``, ``energy_powermetrics.py``)."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any


class EnergyUnavailable(Exception):
    """A source cannot give a reading; the message is the reason shown to the user."""


def mean_power_joules(samples: Sequence[tuple[float, float]], seconds: float) -> float:
    """Joules over ``seconds`` from (weight, watts) power samples: the weighted mean power times
    the interval, so an interval that ends between two samples is still fully counted."""
    total_weight = sum(weight for weight, _ in samples)
    if not samples or total_weight <= 0:
        raise EnergyUnavailable(f"no power sample during the {seconds:.2f} s measured")
    return sum(weight * watts for weight, watts in samples) / total_weight * seconds


class EnergySource(ABC):
    name: str = ""
    #: How the joules are obtained, and the sensor's granularity, in words for the result.
    method: str = ""
    resolution: str = ""
    #: The shortest window the source measures well (the meter passes it on to the loop).
    min_seconds: float = 0.0
    #: Set by ``stop``: the last figure is an estimate, not the sensor's measurement.
    estimated: bool = False
    #: Set by ``stop``: what the same reading said about the device's state over the window
    #: (powermetrics' GPU clock and thermal pressure); {} where the source says nothing more.
    conditions: dict[str, Any] = {}  # noqa: RUF012 - replaced, never mutated

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

    @property
    def samples(self) -> int:
        return len(self._samples)

    def stop(self) -> float:
        seconds = time.perf_counter() - self._started
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._error:
            raise EnergyUnavailable(self._error)
        return mean_power_joules(self._samples, seconds)
