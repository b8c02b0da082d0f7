"""Timing checks: accelbench's own timed loop (:class:`StepLoop`) on the device must read work in
proportion to its size, agree between windowed and per-step synchronisation, and see work the
device finishes after the host has moved on.

On a shared machine a reading can be off by scheduler quanta, so each loop run is read by a low
quantile of its raw samples and each comparison is the median of many short interleaved rounds
(A, B, A, B ...): a busy spell then stretches both sides of a round alike. CPU kernels
run on one thread here: with every core busy, a multi-threaded kernel waits for its slowest,
descheduled thread, which is noise about the machine, not about the timer.

The work is sized so the device, not the host's kernel launches, sets a step's time
(``accelbench.selftest.work``): otherwise a ``synchronize()`` that does not wait still reads a
plausible figure.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Protocol

import torch

from accelbench.devices import Device
from accelbench.devices.base import Availability, DeviceAdapter
from accelbench.measure.loop.step_loop import StepLoop
from accelbench.measure.loop.stop import StopRule
from accelbench.selftest.result import CheckResult, verdict
from accelbench.selftest.work import DeviceBoundWork, StepWork, Work, default_work

GROUP = "timing"
DOUBLING_TOLERANCE = 0.10
AGREEMENT_TOLERANCE = 0.10
#: The measured step must hold at least this share of a planted delay.
DELAY_SEEN = 0.8
#: A timing check is run again (up to this many times in all) before it is called failed.
ATTEMPTS = 3


class _WindowLoop(StepLoop):
    """The timed loop with the window size forced: 1 = a synchronisation after every step."""

    def __init__(self, step: Callable[[Any], Any], device: Device, window: int) -> None:
        super().__init__(step, [torch.zeros(1)] * 4, device)
        self.window = window

    def warm_up(self, steps: int, feed: Any) -> None:
        super().warm_up(steps, feed)
        self.result.steps_per_sample = self.window

    def _size_windows(self, feed: Any, last_step_s: float) -> None:
        """The window is forced: no sizing windows run (on a device whose synchronisation does
        not wait they would grow, queueing work that the check's reference then waits out)."""


def loop_reading(device: Device, step: Callable[[Any], Any], steps: int,
                 window: int | None = None, mean: bool = False) -> float:
    """Seconds per step that accelbench's loop reads for ``step`` on ``device``: the lower
    quartile of its samples (other processes only ever add time, and on a busy machine most
    short steps are interrupted), or with ``mean`` the measured time over the measured steps."""
    loop = StepLoop(step, [torch.zeros(1)] * 4, device) if window is None \
        else _WindowLoop(step, device, window)
    measured = loop.run(StopRule("steps", steps), warmup_steps=2)
    if mean:
        return measured.measured_time_s / measured.measured_steps
    times = sorted(measured.step_times)
    return times[len(times) // 4]


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _rounds(rounds: int, first: Callable[[], float], second: Callable[[], float]) -> list[float]:
    ratios = []
    for index in range(rounds):
        if index % 2:  # alternate the order, so a trend over the rounds cancels out
            b, a = second(), first()
        else:
            a, b = first(), second()
        ratios.append(b / a if a > 0 else float("inf"))
    return ratios


def _work_figures(work: StepWork) -> dict[str, Any]:
    if not isinstance(work, DeviceBoundWork):
        return {}
    return {"side": work.side, "product_s": work.product_s, "launch_s": work.launch_s,
            "device_bound": work.device_bound}


def check_doubling(device: Device, step_s: float, label: str, rounds: int = 5,
                   work: StepWork | None = None) -> CheckResult:
    """Twice the work per step must read twice the time, within 10%. On an asynchronous device
    the work is device-bound and doubled within the same launches, so a synchronisation that does
    not wait reads about 1x (see the module's docstring)."""
    work = work or default_work(device)
    units = work.units_for(step_s)
    # Small steps are shorter than a scheduler time slice, so on a busy machine some run
    # uninterrupted (the low quantile reads those); large ones span many slices, and a fair
    # share stretches them in proportion to their work.
    steps = max(8, min(40, round(0.05 / step_s)))
    ratios = _rounds(rounds, lambda: loop_reading(device, work.step(units), steps),
                     lambda: loop_reading(device, work.doubled(units), steps))
    ratio = statistics.median(ratios)
    ok = abs(ratio - 2.0) <= 2.0 * DOUBLING_TOLERANCE
    return CheckResult(GROUP, f"doubling the work doubles the time ({label} steps)", device.name,
                       verdict(ok), f"{work.describe(units)}: 2x work read "
                       f"{ratio:.3f}x the time (median of {rounds} "
                       f"rounds, {min(ratios):.3f}-{max(ratios):.3f}); allowed 1.8-2.2",
                       {"ratio": ratio, "ratios": ratios, "units": units, "step_s": step_s,
                        **_work_figures(work)})


def check_windowed_agrees(device: Device, step_s: float = 0.002, window: int = 8,
                          rounds: int = 5, work: StepWork | None = None) -> CheckResult:
    """A step timed in windows of ``window`` steps (one sync each) and timed with a sync after
    every step must read the same: else the sync itself is being measured. On an asynchronous
    device the step is device-bound work, so the per-step side really waits for the device."""
    work = work or default_work(device)
    step = work.step(work.units_for(step_s))
    steps = window * 8
    # Means on both sides: a window's sample is the mean of its steps, and a median of single
    # steps would skip the scheduler gaps that every window of a busy machine contains.
    ratios = _rounds(rounds, lambda: loop_reading(device, step, steps, window=1, mean=True),
                     lambda: loop_reading(device, step, steps, window=window, mean=True))
    ratio = statistics.median(ratios)
    ok = abs(ratio - 1.0) <= AGREEMENT_TOLERANCE
    return CheckResult(GROUP, "windowed and per-step synchronised figures agree", device.name,
                       verdict(ok), f"windows of {window} read {ratio:.3f}x the per-step "
                       f"figure (median of {rounds} rounds); allowed 0.9-1.1",
                       {"ratio": ratio, "ratios": ratios, "window": window, **_work_figures(work)})


class DelayQueue(Protocol):
    """Where a planted delay runs: ``submit`` queues it and returns at once; ``wait`` waits for
    its result through a data dependency, not through the device's synchronize."""

    device: Device

    def submit(self) -> None: ...

    def wait(self) -> None: ...


class DeviceQueue:
    """An asynchronous device's own queue: the delay is a chain of products on the device, and
    its result read back to the host (which must wait for it) is the independent reference."""

    def __init__(self, device: Device, delay_s: float) -> None:
        self.device = device
        # Large products: a few launches queue the whole delay, so the host is back long before
        # the device is done (a chain of tiny kernels would keep the host busy as long).
        self.work = Work(device, side=2048)
        self.run = self.work.step(self.work.units_for(delay_s))
        self.last: torch.Tensor | None = None

    def submit(self) -> None:
        self.last = self.run(None)

    def wait(self) -> None:
        assert self.last is not None
        self.last.sum().item()


class ThreadQueueAdapter(DeviceAdapter):
    """The CPU seen as an asynchronous device: kernels run on a background thread and
    ``synchronize`` waits for them, as a GPU's does. The CPU itself computes synchronously, so
    this is how the loop's synchronisation discipline is checked there."""

    kind = "cpu-queue"
    is_async = True

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.pending: list[Future[Any]] = []

    def availability(self) -> Availability:
        return Availability(self.kind, True, count=1)

    def synchronize(self, index: int) -> None:
        for future in self.pending:
            future.result()
        self.pending.clear()

    def reset_peak_memory(self, index: int) -> None:
        return None

    def peak_memory_bytes(self, index: int) -> int | None:
        return None

    def info(self, index: int) -> dict[str, Any]:
        return {"name": "the CPU behind a background-thread queue"}

    def torch_device(self, index: int) -> str:
        return "cpu"


class ThreadQueue:
    """A planted delay on a :class:`ThreadQueueAdapter`: the worker thread is busy for
    ``delay_s`` (a sleep: a known duration that other processes cannot stretch)."""

    def __init__(self, delay_s: float, adapter: ThreadQueueAdapter | None = None) -> None:
        self.adapter = adapter or ThreadQueueAdapter()
        self.device = Device(self.adapter, self.adapter.kind)
        self.delay_s = delay_s
        self.future: Future[Any] | None = None

    def submit(self) -> None:
        self.future = self.adapter.pool.submit(time.sleep, self.delay_s)
        self.adapter.pending.append(self.future)

    def wait(self) -> None:
        assert self.future is not None
        self.future.result()


def default_queue(device: Device, delay_s: float) -> DelayQueue:
    return DeviceQueue(device, delay_s) if device.is_async else ThreadQueue(delay_s)


def check_async_delay(device: Device, delay_s: float = 0.02, rounds: int = 5,
                      queue: DelayQueue | None = None) -> CheckResult:
    """A step that only queues a delay (the host returns at once) must be timed at the delay's
    full length: the loop's synchronisation has to wait for queued work."""
    queue = queue or default_queue(device, delay_s)

    def reference() -> float:
        queue.device.synchronize()
        start = time.perf_counter()
        queue.submit()
        queue.wait()
        return time.perf_counter() - start

    def queued(batch: Any) -> None:
        queue.submit()

    readings = []
    for _ in range(rounds):
        readings.append((min(reference() for _ in range(3)),
                         loop_reading(queue.device, queued, 5, window=1)))
    ratio = statistics.median(measured / ref for ref, measured in readings)
    ok = ratio >= DELAY_SEEN
    return CheckResult(GROUP, "a planted asynchronous delay is seen", device.name, verdict(ok),
                       f"a queued {readings[0][0] * 1e3:.1f} ms delay read as {ratio:.2f} of "
                       f"itself (median of {rounds} rounds, on {queue.device.info()['name']}); "
                       f"required >= {DELAY_SEEN}", {"ratio": ratio, "readings": readings})


def timing_checks(device: Device, quick: bool = False) -> list[Callable[[], CheckResult]]:
    rounds = 5 if quick else 9

    def one_thread(check: Callable[[], CheckResult]) -> Callable[[], CheckResult]:
        # A busy machine can spoil every round of one attempt; a real fault (a sync that does
        # not wait, a timer that under-reads) fails every attempt. The attempts are reported.
        def run() -> CheckResult:
            with single_thread():
                attempt, result = 1, check()
                while result.failed and attempt < ATTEMPTS:
                    attempt, result = attempt + 1, check()
            return replace(result, detail=f"{result.detail}; attempt {attempt} of {ATTEMPTS}",
                           figures={**result.figures, "attempts": attempt})
        return run

    return [one_thread(check) for check in (
        lambda: check_doubling(device, 0.0005, "small", rounds),
        lambda: check_doubling(device, 0.02, "large", rounds),
        lambda: check_windowed_agrees(device, rounds=rounds),
        lambda: check_async_delay(device, rounds=rounds),
    )]
