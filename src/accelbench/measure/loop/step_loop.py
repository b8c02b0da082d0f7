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

Input: each step is followed by fetching the next batch, as in ``for batch in loader: step(batch)``,
so on an asynchronous device the fetch overlaps the device's queued work. A window's time holds
its k steps and k fetches. The wait for input is the time the *device* sat idle waiting for a
batch (see ``accelbench.measure.loop.input_wait``): on the CPU the fetch time, on an accelerator the
gap the fetch left in the device's queue, measured with timing events, so a device-bound case
whose loader looks slow from the host is not called input-bound. Where the device's events are
not safe around every step (MPS: each record commits the command buffer) the timed window
records none, and the host fetch time is kept as an upper bound.

Only full batches are timed under ``--steps`` and ``--time-budget``: an epoch's partial last
batch is a different step (and under ``torch.compile`` a recompilation), so the stream skips it.
``--epochs`` runs whole epochs, partial batch included, as the published tables did; its warm-up
then ends with one step on a batch of the partial batch's size, so a compiled model meets that
shape (and compiles the partial batch's own static graph, ``engine/steps.py``) before the timed
region, while the full batches keep running the static graph a ``--steps`` run times.

Stopping: a number of steps, whole epochs, or a time budget. Under a time budget with a target
precision (``--target-ci PCT``), the loop also stops as soon as the median step time's 95%
confidence interval lies within +-PCT% of the median (checked from ``MIN_ADAPTIVE_SAMPLES``
samples on, as the samples grow by a tenth); otherwise the budget ends it, and the precision
reached is reported either way.

Trackers (``accelbench.measure.trackers.region``: sensors, energy) bracket the measured region only:
entered after warm-up, with the device idle, just before the first measured step, and exited right
after the last (also when a step raises). A tracker that needs a minimum window (a coarse energy
counter) keeps the window open that long: see ``_extend_window``. The case's memory tracker spans
the whole case; the loop tells it where the warm-up ended (``MemoryTracker.steady_state``), so
the peak it reports is the steady state's and the set-up's (cuDNN's autotuning workspaces under
``cudnn.benchmark``) is kept beside it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from contextlib import ExitStack
from typing import Any

import torch

from accelbench.devices import Device
from accelbench.measure.loop.clock import nothing, synced_seconds
from accelbench.measure.loop.input_wait import InputWait
from accelbench.measure.loop.stop import MIN_WINDOW_S, StopRule
from accelbench.measure.loop.sustained import SensorReader, SustainedSeries, run_sustained
from accelbench.measure.loop.timing import Timing
from accelbench.measure.trackers.region import MemoryTracker, Tracker

Progress = Callable[[str, float, float | None], None]
#: The precision target is first checked at this many samples (the drift check needs 16; the
#: order-statistic interval at 20 samples spans ranks 6..15, so one stray sample cannot end it).
MIN_ADAPTIVE_SAMPLES = 20


#: A window's one synchronisation may be at most this share of it (on a device whose
#: synchronisation is slow, MPS at times, windows grow to hold it) ...
MAX_SYNC_SHARE = 0.02
#: ... and a window lasts at least this many ticks of the clock (a coarse clock's reading of a
#: window is then exact to 1%).
TICKS_PER_WINDOW = 100
#: No window holds more steps than this, whatever the readings say ...
MAX_STEPS_PER_SAMPLE = 100_000
#: ... and the windows are sized in at most this many tries (a sound clock needs one or two; one
#: that under-reads, as a counter that wraps does, would otherwise grow them a step at a time
#: for ever).
MAX_SIZING_ROUNDS = 8


def synchronize_cost(device: Device, repeats: int = 5) -> float:
    """Seconds one synchronisation of the idle device takes (the median of ``repeats``)."""
    costs = sorted(synced_seconds(device, nothing) for _ in range(repeats))
    return costs[len(costs) // 2]


_TICK: list[float] = []


def clock_tick() -> float:
    """The smallest step ``time.perf_counter`` advances by, measured once per process (a
    nanosecond clock on Linux and macOS reads about a microsecond here, a coarse one its tick)."""
    if not _TICK:
        steps: list[float] = []
        last = time.perf_counter()
        for _ in range(1_000_000):
            now = time.perf_counter()
            if now != last:
                steps.append(now - last)
                last = now
                if len(steps) == 5:
                    break
        _TICK.append(min(steps) if steps else 1e-6)
    return _TICK[0]


class NonFiniteError(RuntimeError):
    def __init__(self, step: int) -> None:
        super().__init__(f"non-finite loss/output (NaN or Inf) at step {step}")
        self.step = step


def batch_length(batch: Any) -> int | None:
    """Samples in a batch: the leading size of its first tensor; None when it has none."""
    first = batch[0] if isinstance(batch, tuple | list) and batch else batch
    return int(first.shape[0]) if isinstance(first, torch.Tensor) and first.dim() else None


class BatchStream:
    """Endless batches from an epoch iterable, restarting it at each epoch's end.

    With ``full_batch``, batches of fewer samples (an epoch's partial last batch) are skipped so
    that every timed step has one shape. When a whole epoch has no full batch (a data set smaller
    than one batch) skipping stops: its batches are then all there is to time.
    """

    def __init__(self, epoch: Iterable[Any], full_batch: int | None = None) -> None:
        self._epoch = epoch
        self._iter: Iterator[Any] = iter(epoch)
        self.full_batch = full_batch
        self._full_this_epoch = False

    def next(self) -> Any:
        while True:
            batch = self._next_any()
            length = batch_length(batch)
            if self.full_batch is None or length is None or length >= self.full_batch:
                self._full_this_epoch = True
                return batch

    def _next_any(self) -> Any:
        try:
            return next(self._iter)
        except StopIteration:
            if not self._full_this_epoch:
                self.full_batch = None
            self._full_this_epoch = False
            self._iter = iter(self._epoch)
            return next(self._iter)


class Feed:
    """The next batch, fetched after the current step is queued (timed by ``wait``)."""

    def __init__(self, next_batch: Callable[[], Any], wait: InputWait) -> None:
        self._next_batch, self._wait = next_batch, wait
        self._batch: Any = None
        self._ready = False
        self.exhausted = False

    def prefetch(self) -> None:
        if self._ready or self.exhausted:
            return
        try:
            self._batch = self._wait.fetch(self._next_batch)
            self._ready = True
        except StopIteration:
            self.exhausted = True

    def take(self) -> Any:
        """The prefetched batch (fetched now if none is); raises StopIteration at the end."""
        self.prefetch()
        if not self._ready:
            raise StopIteration
        self._ready = False
        batch, self._batch = self._batch, None
        return batch


def _check_finite(output: Any, step: int) -> None:
    if isinstance(output, torch.Tensor) and output.is_floating_point() \
            and not bool(torch.isfinite(output).all()):
        raise NonFiniteError(step)


class StepLoop:
    """Runs ``step(batch)`` under a stop rule on one device and keeps the raw samples."""

    def __init__(self, step: Callable[[Any], Any], epoch: Iterable[Any], device: Device,
                 progress: Progress | None = None,
                 epoch_end: Callable[[], dict[str, float]] | None = None,
                 trackers: Sequence[Tracker] = (),
                 batch_size: int | None = None, partial_batch: int = 0,
                 sustained_sensors: SensorReader | None = None,
                 memory: MemoryTracker | None = None) -> None:
        self.step = step
        self.epoch_end = epoch_end
        #: Entered in order just before the measured steps, exited in reverse right after them.
        self.trackers = list(trackers)
        #: The case's memory tracker (entered by the caller around the whole case), told where
        #: the warm-up ends.
        self.memory = memory
        self.epoch = epoch
        #: The full batch size: steps/time rules time only batches this large.
        self.batch_size = batch_size
        #: Samples in an epoch's partial last batch (0: none), warmed up before --epochs.
        self.partial_batch = partial_batch
        self.device = device
        self.progress = progress or (lambda phase, done, total: None)
        self.result = Timing()
        self.wait = InputWait(device)
        #: Steps inside the trackers' window (the measured steps, plus any extension): the
        #: count a tracker's per-step figure (joules per step) divides by.
        self.window_steps = 0
        self._steps_done = 0
        #: --sustained: the sensors read per interval, and the series the run recorded.
        self.sustained_sensors = sustained_sensors
        self.sustained: SustainedSeries | None = None

    def _run_window(self, feed: Feed, k: int) -> tuple[float, int]:
        """Run up to k steps, each followed by fetching the next batch; synchronise once;
        return (seconds, steps run)."""
        self.wait.prepare(k + 1)  # its timing events are made now, outside the timed window
        start = time.perf_counter()
        output: Any = None
        ran = 0
        while ran < k:
            try:
                batch = feed.take()
            except StopIteration:
                break
            output = self.step(batch)
            ran += 1
            feed.prefetch()
        self.device.synchronize()
        elapsed = time.perf_counter() - start
        self.wait.settle()
        self._steps_done += ran
        if ran:
            _check_finite(output, self._steps_done)
        return elapsed, ran

    def warm_up(self, steps: int, feed: Feed) -> None:
        self.device.synchronize()
        times = []
        for i in range(steps):
            elapsed, _ = self._run_window(feed, 1)
            times.append(elapsed)
            if i == 0:
                self.result.time_to_first_step_s = elapsed
            self.progress("warm-up", i + 1, steps)
        self.result.warmup_steps = steps
        self.result.warmup_time_s = sum(times) if times else None
        if times and self.device.is_async:
            self._size_windows(feed, times[-1])

    def _size_windows(self, feed: Feed, last_step_s: float) -> None:
        """Choose k, the steps a window holds, so that its one synchronisation and the clock's
        tick are a small part of it: at least ``MIN_WINDOW_S``, ``1 / MAX_SYNC_SHARE`` times what
        a synchronisation costs, and ``TICKS_PER_WINDOW`` ticks of the clock.

        The window is found by running windows of growing k (these steps are warm-up, counted in
        it), not extrapolated from one step: a step's reading holds a synchronisation (5 ms on a
        device with a slow one would make every step its own window, sync included), and on a
        coarse clock a short step reads 0 s (k would explode to the cap of the division)."""
        sync_s = synchronize_cost(self.device)
        target = max(MIN_WINDOW_S, sync_s / MAX_SYNC_SHARE, clock_tick() * TICKS_PER_WINDOW)
        self.result.sync_s = sync_s
        if last_step_s >= target:
            return
        k, elapsed = 1, last_step_s
        for _ in range(MAX_SIZING_ROUNDS):
            if elapsed >= target or k >= MAX_STEPS_PER_SAMPLE:
                break
            net = elapsed - sync_s
            # Extrapolate only from a window long enough to read; grow at most 16-fold a round.
            grow = target / net if net > 10 * clock_tick() else 2.0
            k = min(MAX_STEPS_PER_SAMPLE, max(k + 1, math.ceil(k * min(grow, 16.0))))
            elapsed, ran = self._run_window(feed, k)
            self.result.warmup_steps += ran
            self.result.warmup_time_s = (self.result.warmup_time_s or 0.0) + elapsed
            if ran < k:  # the data ran out: an epoch shorter than a window
                break
        self.result.steps_per_sample = k

    def _warm_up_partial_shape(self, feed: Feed) -> None:
        sliced = tuple(t[: self.partial_batch] for t in feed.take())
        elapsed, _ = self._run_window(Feed(iter([sliced]).__next__, self.wait), 1)
        self.result.warmup_steps += 1
        self.result.warmup_time_s = (self.result.warmup_time_s or 0.0) + elapsed

    def _record(self, elapsed: float, ran: int) -> None:
        self.result.step_times.append(elapsed / ran)
        self.result.measured_time_s += elapsed
        self.result.measured_steps += ran

    def run(self, stop: StopRule, warmup_steps: int,
            settle: Callable[[StopRule, Timing], StopRule] | None = None) -> Timing:
        """Warm up, then measure until ``stop``. ``settle`` (a torchrun rank's) is called after
        the warm-up with the rule and the timing so far, and returns the rule to measure by (the
        step count every rank agrees on); it may set ``steps_per_sample`` (ranks time single
        steps)."""
        stream = BatchStream(self.epoch, self.batch_size if stop.kind != "epochs" else None)
        feed = Feed(stream.next, self.wait)
        self.warm_up(warmup_steps, feed)
        if stop.kind == "epochs" and warmup_steps and self.partial_batch:
            self._warm_up_partial_shape(feed)
        if settle is not None:
            stop = settle(stop, self.result)
        k = self.result.steps_per_sample
        if stop.kind != "epochs":
            feed.prefetch()  # the first measured step's batch, fetched outside the timed region
        with ExitStack() as window:  # exits every entered tracker, also when a step raises
            self._begin_measuring(window)
            if stop.kind == "epochs":
                self._run_epochs(int(stop.value), k)
            elif stop.kind == "sustained":
                self._run_sustained(stop, feed, k)
            elif stop.kind == "steps":
                target = int(stop.value)
                while self.result.measured_steps < target:
                    self._record(*self._run_window(feed, min(k, target - self.result.measured_steps)))
                    self.progress("measure", self.result.measured_steps, target)
            else:
                self._run_for_time(stop, feed, k)
            self.result.stop_reason = self.result.stop_reason or stop.kind
            # Whole epochs last long enough for any energy counter; a step count may not.
            self._end_measuring(feed, k, extend_window=stop.kind != "epochs")
        if self.epoch_end is not None and stop.kind != "epochs":
            self.result.epoch_end_s = self._timed_epoch_end()
        return self.result

    def _run_sustained(self, stop: StopRule, feed: Feed, k: int) -> None:
        """``--sustained``: windows back to back for the duration, recorded per interval with
        the sensors (measure/loop/sustained.py); each interval is one sample (its seconds over its
        steps), so the case's throughput is the whole run's and the series stays small."""

        def window() -> int:
            return self._run_window(feed, k)[1]

        series = run_sustained(window, stop.value, stop.interval, self.sustained_sensors,
                               progress=lambda done, total: self.progress("measure", done, total))
        for steps, seconds in zip(series.work, series.seconds, strict=True):
            self._record(seconds, int(steps))
        self.sustained = series
        self.result.stop_reason = "sustained"

    def _run_for_time(self, stop: StopRule, feed: Feed, k: int) -> None:
        target = stop.target_ci_pct
        self.result.target_ci_pct = target or None
        next_check = MIN_ADAPTIVE_SAMPLES
        while True:
            self._record(*self._run_window(feed, k))
            samples = self.result.step_times
            self.progress("measure", min(self.result.measured_time_s, stop.value), stop.value)
            # Between windows, so the check's own time is in no sample.
            checking = bool(target) and len(samples) >= next_check and self._window_long_enough(stop)
            reason = stop.reason_to_stop(samples, self.result.measured_time_s, checking)
            if reason:
                self.result.stop_reason = reason
                return
            if checking:
                next_check = max(len(samples) + 1, int(len(samples) * 1.1))

    def _min_window_s(self) -> float:
        return max((tracker.min_window_s for tracker in self.trackers), default=0.0)

    def _window_long_enough(self, stop: StopRule) -> bool:
        """An energy counter that updates coarsely (NVML: about every 100 ms) needs a window of
        its tracker's ``min_window_s`` to give a measured figure (the ml.energy/zeus treatment):
        precise timing alone does not end the measurement before that, within the time budget."""
        return self.result.measured_time_s >= min(self._min_window_s(), stop.value)

    def _begin_measuring(self, window: ExitStack) -> None:
        self.wait.reset()  # warm-up input is not steady state
        if self.trackers or self.memory is not None:
            self.device.synchronize()  # the readings start with an idle queue
        if self.memory is not None:
            self.memory.steady_state()  # the warm-up's one-off allocations are the set-up's
        for tracker in self.trackers:
            window.enter_context(tracker)

    def _end_measuring(self, feed: Feed, k: int, extend_window: bool) -> None:
        # The last window ended with a synchronisation: the device is idle here.
        self.wait.settle()
        self.result.input_wait_s = self.wait.device_idle_s
        self.result.input_fetch_s = self.wait.host_fetch_s
        self.result.input_wait_method = self.wait.method
        self.window_steps = self.result.measured_steps
        if extend_window:
            self._extend_window(feed, k)

    def _extend_window(self, feed: Feed, k: int) -> None:
        """A fixed step count (``--steps``, or a budget shorter than the counter needs) can end
        before a coarse energy counter (NVML updates about every 100 ms) has measured anything.
        Then further steps run inside the trackers' window only, never in the timing samples,
        until it lasts the trackers' ``min_window_s``; the energy figures divide by every step the
        window held (``window_steps``). This is the ml.energy/zeus treatment: a 0 J step is never
        reported."""
        floor = self._min_window_s()
        elapsed = self.result.measured_time_s
        while elapsed < floor:
            seconds, ran = self._run_window(feed, k)
            if not ran:
                break
            elapsed += seconds
            self.window_steps += ran

    def _timed_epoch_end(self) -> float:
        epoch_end = self.epoch_end
        assert epoch_end is not None
        return synced_seconds(self.device, lambda: self.result.metrics.update(epoch_end()))

    def _run_epochs(self, epochs: int, k: int) -> None:
        per_epoch = len(self.epoch) if isinstance(self.epoch, Sized) else 0
        for epoch in range(epochs):
            feed = Feed(iter(self.epoch).__next__, self.wait)
            in_epoch = 0
            self.device.synchronize()
            start = time.perf_counter()
            while True:
                elapsed, ran = self._run_window(feed, k)
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
