"""Timing work queued back to back: many items between two synchronisations.

A ceiling timed one item per synchronisation includes the launch and sync latency with every
item: on an H100 a 4096² bf16 product takes about 0.2 ms and a 512 MiB copy about 0.3 ms, both
comparable to launch + sync. So each timed window queues items for at least ``min_window_s``
with one synchronisation at its end, and the figure is the fastest window's time per item. The
matmul peak (:mod:`accelbench.measure.ceilings.peak`) and the bandwidth figures
(:mod:`accelbench.measure.ceilings.bandwidth`) are timed this way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from accelbench.devices import Device
from accelbench.measure.loop.clock import synced_seconds

#: Each timed window lasts at least this long between two synchronisations.
MIN_WINDOW_S = 0.1
#: How often a window that came out too short is lengthened and timed again.
REGROWS = 3


def queue_length(timed: Callable[[int], float], single: float, min_window_s: float) -> int:
    """How many items one window queues so that it lasts ``min_window_s``. Grown by measuring,
    not by dividing: ``single`` includes the launch and sync latency, which a longer queue
    amortises, so dividing by it would stop far short on a device with a slow sync."""
    count, elapsed = 1, single
    while elapsed < min_window_s:
        count = min(count * 8, max(count * 2, math.ceil(count * min_window_s / max(elapsed, 1e-9))))
        elapsed = timed(count)
    return count


def best_window(timed: Callable[[int], float], count: int, repeats: int,
                min_window_s: float) -> tuple[int, float]:
    """(items per window, seconds) of the fastest of ``repeats`` windows of ``count`` items. A
    calibration slowed by other processes leaves windows too short to hide the sync on a quiet
    device, so a fastest window under half of ``min_window_s`` is lengthened and timed again."""
    best = min(timed(count) for _ in range(repeats))
    for _ in range(REGROWS):
        if best >= min_window_s / 2:
            break
        count = max(count * 2, math.ceil(count * min_window_s / max(best, 1e-9)))
        best = min(timed(count) for _ in range(repeats))
    return count, best


def window_timer(device: Device, work: Callable[[], object]) -> Callable[[int], float]:
    """Seconds for ``n`` runs of ``work`` queued back to back, one synchronisation at the end."""

    def timed(count: int) -> float:
        return synced_seconds(device, work, count)

    return timed


@dataclass(frozen=True)
class QueuedTiming:
    seconds_per_item: float
    items_per_sync: int


def time_queued(device: Device, work: Callable[[], object], repeats: int,
                min_window_s: float = MIN_WINDOW_S) -> QueuedTiming:
    """Seconds per run of ``work`` in the fastest of ``repeats`` windows of at least
    ``min_window_s`` each (after one untimed run: first-touch allocation, kernel selection)."""
    timed = window_timer(device, work)
    timed(1)
    count = queue_length(timed, timed(1), min_window_s)
    count, best = best_window(timed, count, repeats, min_window_s)
    return QueuedTiming(best / count, count)
