"""Trackers: what is measured around a region of a case, as context managers composed around it.

A tracker starts on ``__enter__`` and reads on ``__exit__``; its ``result`` is a small typed value
the runner copies into the case's record. Trackers compose (``contextlib.ExitStack``): entered in
order, exited in reverse, so the one that must hug the measured steps goes last. Two regions use
them (see ``engine.measure_case._measure``):

* the case: :class:`MemoryTracker` around building the model, warm-up and the measured steps.
  Where the warm-up ends (the timed loop, or a generation's warm-up rounds, calls
  ``steady_state()``) it reads the set-up peak (building the model, the first steps' one-off
  allocations: cuDNN's autotuning tries each convolution algorithm with a workspace of its own,
  gigabytes on a ResNet-50, under ``cudnn.benchmark``) and resets the device's counter, so the
  peak it reports is the steady state's, what running the case goes on needing, with the set-up
  peak beside it; memory the harness holds on the device for the whole case (the ``--data
  synthetic-device`` batch pool) is set aside from both, and said so;
* the measured steps: :class:`SensorTracker` and :class:`EnergyTracker`, handed to the timed loop
  (:class:`accelbench.measure.loop.step_loop.StepLoop`), which enters them after warm-up with the device
  idle, just before the first measured step, and exits them right after the last one.

The step times are not a tracker: the loop times windows of steps with a synchronisation at each
window's end and stops on the samples' precision (see ``loop.py``), which a region with one start
and one end cannot express.

A tracker never fails the case it measures: an exception in its own start or reading becomes its
``error`` (and the result says so), while an exception from the measured code still propagates
after every tracker has been exited (an energy meter's sampling thread or ``powermetrics`` child
is stopped even when a step fails).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from accelbench.measure.trackers.energy import EnergyMeter, EnergyReading
from accelbench.measure.trackers.memory import format_bytes
from accelbench.measure.trackers.sensors import case_sensors

if TYPE_CHECKING:
    from accelbench.devices import Device

T = TypeVar("T", bound="Tracker")


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".strip()


class Tracker:
    """The protocol the loop and the runner compose: ``start`` on enter, ``stop`` on exit."""

    #: The shortest measured window this tracker can resolve, in seconds. The loop keeps the
    #: window open at least this long: the stop rule waits for it, and a fixed step count runs
    #: extra steps inside the trackers' window only, never in the timing samples.
    min_window_s: float = 0.0

    def __init__(self) -> None:
        self.error = ""

    def start(self) -> None:
        """Begin measuring (called by ``__enter__``)."""

    def stop(self) -> None:
        """Take the reading (called by ``__exit__``, also when the measured code raised)."""

    def __enter__(self: T) -> T:
        self.error = ""
        try:
            self.start()
        except Exception as error:  # a sensor never fails the case it measures
            self.error = describe(error)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        try:
            self.stop()
        except Exception as failure:
            self.error = self.error or describe(failure)
        # Returning None: an exception from the measured code propagates unchanged.


# --- memory --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryPeak:
    """The device's peak memory over the tracked region, and what that figure is."""

    bytes: int | None
    #: What the counter measures (e.g. "process peak RSS"), from the device adapter.
    source: str
    #: True when the figure can miss allocations (MPS's sampled live tensors): shown as ">=".
    lower_bound: bool
    error: str = ""
    #: Bytes set aside from the device's own peak (see MemoryTracker.set_aside); in ``source``.
    set_aside_bytes: int = 0
    #: The peak over the set-up (building, warm-up), read where the steady state began; None where
    #: the region had no steady state or the device's counter could not be reset (``bytes`` then
    #: holds the set-up too, and ``source`` says so).
    setup_bytes: int | None = None


class MemoryTracker(Tracker):
    """Resets the device's peak-memory counter on enter and reads the peak on exit.

    ``steady_state()`` where the set-up ends reads the peak so far as the set-up peak and resets
    the counter: the peak read on exit is then the steady state's. A device whose counter cannot
    be reset (``Device.reset_peak_memory`` returns False) keeps counting from the start: its
    figure is the whole region's, and ``source`` says it holds the set-up.

    ``note_peak()`` then ``set_aside(n, what)`` around an allocation that stays live for the rest
    of the region but is not the case's own (the ``--data synthetic-device`` batch pool) take it
    out of the figure: the peak is then max(peak before it, peak at the end - n). That is exact
    for a counted peak wherever the maximum fell: after the allocation, everything else live was
    the end peak less n; before it, the peak read just before.
    """

    def __init__(self, device: Device) -> None:
        super().__init__()
        self.device = device
        self._peak: int | None = None
        self._before: int | None = None
        self._aside: tuple[int, str] = (0, "")
        self._setup: int | None = None
        self._not_reset = False

    def start(self) -> None:
        self._peak = self._before = self._setup = None
        self._aside = (0, "")
        self._not_reset = False
        self.device.reset_peak_memory()

    def steady_state(self) -> None:
        """The set-up ends here: read its peak, and count the steady state's from now on."""
        try:
            self._setup = self._less_aside(self.device.peak_memory_bytes())
            self._not_reset = self.device.reset_peak_memory() is False
        except Exception as error:  # the tracker never fails the case
            self.error = self.error or describe(error)
        # The pool set aside was live when the counter restarted: the steady peak is the end
        # peak less the pool, never the peak noted before the pool was made.
        self._before = None

    def _less_aside(self, peak: int | None) -> int | None:
        """``peak`` without the bytes set aside (see the class's docstring)."""
        aside = self._aside[0]
        if not aside or peak is None:
            return peak
        return max(self._before or 0, peak - aside)

    def note_peak(self) -> None:
        """The peak so far: call just before the allocation ``set_aside`` will name."""
        try:
            self._before = self.device.peak_memory_bytes()
        except Exception as error:  # the tracker never fails the case
            self.error = self.error or describe(error)

    def set_aside(self, nbytes: int, what: str) -> None:
        """Leave ``nbytes`` of ``what`` (allocated since ``note_peak``, live to the end) out."""
        self._aside = (nbytes, what) if nbytes > 0 else (0, "")

    def stop(self) -> None:
        self._peak = self.device.peak_memory_bytes()

    @property
    def result(self) -> MemoryPeak:
        # Read after the peak: an adapter may learn only then which counter it had (MPS).
        source, lower_bound = self.device.memory_source, self.device.memory_is_lower_bound
        if self.error:
            return MemoryPeak(None, f"{source} (not read: {self.error})", lower_bound, self.error)
        aside, what = self._aside
        setup = None if self._not_reset else self._setup
        if self._not_reset:
            source = f"{source}; set-up included (this device's peak counter cannot be reset)"
        if not aside or self._peak is None:
            return MemoryPeak(self._peak, source, lower_bound, setup_bytes=setup)
        return MemoryPeak(self._less_aside(self._peak), f"{source}; less {format_bytes(aside)} of "
                          f"{what}, held for the whole case", lower_bound, set_aside_bytes=aside,
                          setup_bytes=setup)


# --- sensors -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SensorReadings:
    """Frequencies and temperatures just before and right after the measured steps."""

    start: dict[str, Any] = field(default_factory=dict)
    end: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        readings: dict[str, Any] = {"start": self.start, "end": self.end}
        return {**readings, "error": self.error} if self.error else readings


class SensorTracker(Tracker):
    """Reads ``read()`` (by default the case's CPU and device sensors) on enter and on exit: a
    reading at idle, before any work, says nothing about throttling under load."""

    def __init__(self, device: Device, read: Callable[[], dict[str, Any]] | None = None) -> None:
        super().__init__()
        self._read = read or (lambda: case_sensors(device))
        self._start: dict[str, Any] = {}
        self._end: dict[str, Any] = {}

    def start(self) -> None:
        self._start, self._end = {}, {}
        self._start = dict(self._read())

    def stop(self) -> None:
        self._end = dict(self._read())

    @property
    def result(self) -> SensorReadings:
        return SensorReadings(self._start, self._end, self.error)


# --- energy --------------------------------------------------------------------------------------
class EnergyTracker(Tracker):
    """The energy meter (``measure/trackers/energy.py``) around the measured steps.

    The meter keeps its rules: the first available source, a reading that never fails the case,
    never 0 J, method/resolution/estimated recorded. Its ``min_seconds`` becomes this tracker's
    ``min_window_s``, so the loop measures long enough for a coarse counter (NVML's ~100 ms).
    """

    def __init__(self, meter: EnergyMeter) -> None:
        super().__init__()
        self.meter = meter
        self.reading: EnergyReading | None = None

    def prepare(self) -> None:
        """Probe the sources now (NVML init, a powermetrics sample: up to ~1 s), outside the
        measured window."""
        self.meter.prepare()

    @property
    def min_window_s(self) -> float:  # type: ignore[override]  # the base's class attribute, read live
        return float(self.meter.min_seconds or 0.0)

    def start(self) -> None:
        self.reading = None
        self.meter.start()

    def stop(self) -> None:
        self.reading = self.meter.stop()

    @property
    def result(self) -> EnergyReading | None:
        """The meter's reading; None when the window never opened (the case failed before it)."""
        if self.reading is None and self.error:
            return EnergyReading(None, "", self.error)
        return self.reading
