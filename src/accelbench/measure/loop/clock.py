"""The synced timer: the one way accelbench times work on a device from the host.

Accelerators run work asynchronously: the host returns from a call as soon as the work is queued.
So a timed stretch starts after a synchronisation (nothing queued earlier is counted) and ends
after another (everything it queued has finished), and only the host clock between them is read.
The ceilings (``peak.py``, ``bandwidth.py``, ``queued.py``), the loop's sync cost and epoch end,
the probes and the selftest's work sizing all time through :func:`synced_seconds`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class Synchronizes(Protocol):
    """What the timer needs of a device (``devices.Device`` has it)."""

    def synchronize(self) -> None: ...


def synced_seconds(device: Synchronizes, work: Callable[[], Any], count: int = 1) -> float:
    """Seconds for ``count`` runs of ``work`` queued back to back between two synchronisations of
    ``device``: the first before the clock starts, the second (and its latency) inside."""
    device.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        work()
    device.synchronize()
    return time.perf_counter() - start


def nothing() -> None:
    """Work that queues nothing: ``synced_seconds(device, nothing)`` is one idle synchronisation."""
