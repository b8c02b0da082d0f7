"""The timed loop: warm-up, then steady-state samples until the stop rule is met.

How per-step times are obtained without distorting the run
-----------------------------------------------------------
Every timing boundary is preceded by ``device.synchronize()``, so a time never ends before the
device has finished the work it measures. On the CPU synchronising is free, so each step is its
own sample. On an asynchronous device a synchronisation after every step would stop the host from
queueing step k+1 while the device runs step k; that costs little for long steps but distorts
short ones. So after warm-up, steps shorter than ``MIN_WINDOW_S`` are timed in windows of k
consecutive steps (k chosen so a window lasts at least that long), with a single synchronisation
at the window's end; each window gives one sample, its time divided by k.

A step's time includes fetching its batch (the wait for input), exactly as a training loop sees it;
the input wait is also summed separately so an input-bound case can be recognised.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from accelbench.devices import Device
from accelbench.options import MIN_SAMPLES, MIN_WINDOW_S, StopRule

Progress = Callable[[str, float, float | None], None]


class NonFiniteError(RuntimeError):
    def __init__(self, step: int) -> None:
        super().__init__(f"non-finite loss/output (NaN or Inf) at step {step}")
        self.step = step


class BatchStream:
    """Endless batches from an epoch iterable, restarting it at each epoch's end."""

    def __init__(self, epoch: Iterable[Any]) -> None:
        self._epoch = epoch
        self._iter: Iterator[Any] = iter(epoch)

    def next(self) -> Any:
        try:
            return next(self._iter)
        except StopIteration:
            self._iter = iter(self._epoch)
            return next(self._iter)


@dataclass
class Measured:
    step_times: list[float] = field(default_factory=list)
    steps_per_sample: int = 1
    warmup_steps: int = 0
    time_to_first_step_s: float | None = None
    warmup_time_s: float | None = None
    input_wait_s: float = 0.0
    measured_time_s: float = 0.0
    measured_steps: int = 0
    epoch_times: list[float] = field(default_factory=list)
    #: Seconds of the per-epoch work after the steps (e.g. a kNN evaluation), timed once when
    #: whole epochs did not run; it is added to the projected epoch time.
    epoch_end_s: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)


def _check_finite(output: Any, step: int) -> None:
    if isinstance(output, torch.Tensor) and output.is_floating_point() \
            and not bool(torch.isfinite(output).all()):
        raise NonFiniteError(step)


class StepLoop:
    """Runs ``step(batch)`` under a stop rule on one device and keeps the raw samples."""

    def __init__(self, step: Callable[[Any], Any], epoch: Iterable[Any], device: Device,
                 progress: Progress | None = None,
                 epoch_end: Callable[[], dict[str, float]] | None = None,
                 meter: Any = None) -> None:
        self.step = step
        self.epoch_end = epoch_end
        #: An energy meter (``start()`` / ``stop() -> reading``) around the measured steps only.
        self.meter = meter
        self.energy_reading: Any = None
        self.epoch = epoch
        self.device = device
        self.progress = progress or (lambda phase, done, total: None)
        self.result = Measured()
        self._steps_done = 0

    def _run_window(self, stream_next: Callable[[], Any], k: int) -> tuple[float, int]:
        """Run up to k steps, synchronise once; return (seconds, steps run)."""
        start = time.perf_counter()
        output: Any = None
        ran = 0
        for _ in range(k):
            fetch = time.perf_counter()
            try:
                batch = stream_next()
            except StopIteration:
                break
            self.result.input_wait_s += time.perf_counter() - fetch
            output = self.step(batch)
            ran += 1
        self.device.synchronize()
        elapsed = time.perf_counter() - start
        self._steps_done += ran
        if ran:
            _check_finite(output, self._steps_done)
        return elapsed, ran

    def warm_up(self, steps: int, stream: BatchStream) -> None:
        self.device.synchronize()
        times = []
        input_before = self.result.input_wait_s
        for i in range(steps):
            elapsed, _ = self._run_window(stream.next, 1)
            times.append(elapsed)
            if i == 0:
                self.result.time_to_first_step_s = elapsed
            self.progress("warm-up", i + 1, steps)
        self.result.input_wait_s = input_before  # warm-up input is not steady state
        self.result.warmup_steps = steps
        self.result.warmup_time_s = sum(times) if times else None
        if times and self.device.is_async and times[-1] < MIN_WINDOW_S:
            self.result.steps_per_sample = math.ceil(MIN_WINDOW_S / max(times[-1], 1e-7))

    def _record(self, elapsed: float, ran: int) -> None:
        self.result.step_times.append(elapsed / ran)
        self.result.measured_time_s += elapsed
        self.result.measured_steps += ran

    def run(self, stop: StopRule, warmup_steps: int) -> Measured:
        stream = BatchStream(self.epoch)
        self.warm_up(warmup_steps, stream)
        k = self.result.steps_per_sample
        if self.meter is not None:
            self.device.synchronize()
            self.meter.start()
        if stop.kind == "epochs":
            self._run_epochs(int(stop.value), k)
        elif stop.kind == "steps":
            target = int(stop.value)
            while self.result.measured_steps < target:
                elapsed, ran = self._run_window(stream.next,
                                                min(k, target - self.result.measured_steps))
                self._record(elapsed, ran)
                self.progress("measure", self.result.measured_steps, target)
        else:
            while (self.result.measured_time_s < stop.value
                   or len(self.result.step_times) < MIN_SAMPLES):
                self._record(*self._run_window(stream.next, k))
                self.progress("measure", min(self.result.measured_time_s, stop.value), stop.value)
        if self.meter is not None:
            self.device.synchronize()
            self.energy_reading = self.meter.stop()
        if self.epoch_end is not None and stop.kind != "epochs":
            self.result.epoch_end_s = self._timed_epoch_end()
        return self.result

    def _timed_epoch_end(self) -> float:
        assert self.epoch_end is not None
        self.device.synchronize()
        start = time.perf_counter()
        self.result.metrics.update(self.epoch_end())
        self.device.synchronize()
        return time.perf_counter() - start

    def _run_epochs(self, epochs: int, k: int) -> None:
        per_epoch = len(self.epoch) if hasattr(self.epoch, "__len__") else 0
        for epoch in range(epochs):
            iterator = iter(self.epoch)
            in_epoch = 0
            self.device.synchronize()
            start = time.perf_counter()
            while True:
                elapsed, ran = self._run_window(iterator.__next__, k)
                if not ran:
                    break
                self._record(elapsed, ran)
                in_epoch += ran
                if per_epoch:
                    self.progress("measure", epoch + min(in_epoch / per_epoch, 1.0), epochs)
            if self.epoch_end is not None:
                self.result.epoch_end_s = self._timed_epoch_end()
            self.result.epoch_times.append(time.perf_counter() - start)
            self.progress("measure", epoch + 1, epochs)
