"""Memory bandwidth, kernel-launch latency and host<->device transfer rates of a device.

Each figure is the best of several repeats: like the matmul peak it is a ceiling (or, for the
latency, a floor) that a busy moment can only spoil, never improve. Every repeat is bracketed by
the device's synchronisation, so queued work is counted. Copies are timed as the peak's products
are (:mod:`accelbench.measure.loop.queued`): queued back to back for at least ``MIN_WINDOW_S`` per
synchronisation, since one copy per synchronisation also times the launch and sync latency (5%
of a 512 MiB copy on an H100, 15-25% of a 128 MiB one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from accelbench.devices import Device
from accelbench.measure.loop.clock import synced_seconds
from accelbench.measure.loop.queued import time_queued

#: Each buffer of the bandwidth copy: far beyond any last-level cache this code will meet
#: (32 MiB L3 here, 50 MiB L2 on an H100, 96-128 MiB of system-level cache on Apple's Max chips).
BANDWIDTH_BUFFER_BYTES = 512 * 2**20
TRANSFER_BYTES = 64 * 2**20
LAUNCHES = 2000
REPEATS = 5
#: Each timed window of copies lasts at least this long between two synchronisations.
MIN_WINDOW_S = 0.1


def best_time(device: Device, work: Callable[[], object], repeats: int = REPEATS) -> float:
    """Seconds of the fastest of ``repeats`` runs of ``work``, each between two syncs."""
    work()  # first-touch allocation, kernel selection
    return min(synced_seconds(device, work) for _ in range(repeats))


@dataclass(frozen=True)
class CopyTiming:
    bytes_per_s: float
    copies_per_sync: int


def time_memory_copy(device: Device, buffer_bytes: int = BANDWIDTH_BUFFER_BYTES,
                     repeats: int = REPEATS) -> CopyTiming:
    """Bytes/s of device-to-device copies (each byte read once and written once, as STREAM's
    copy counts it) between two float32 buffers of ``buffer_bytes``, queued back to back for at
    least MIN_WINDOW_S per synchronisation; the fastest of ``repeats`` windows."""
    source = torch.ones(buffer_bytes // 4, device=device.torch_device)
    target = torch.empty_like(source)
    timing = time_queued(device, lambda: target.copy_(source), repeats, MIN_WINDOW_S)
    return CopyTiming(2.0 * source.numel() * 4 / timing.seconds_per_item, timing.items_per_sync)


def memory_bandwidth(device: Device, buffer_bytes: int = BANDWIDTH_BUFFER_BYTES,
                     repeats: int = REPEATS) -> float:
    """Bytes/s of a device-to-device copy: :func:`time_memory_copy`'s figure."""
    return time_memory_copy(device, buffer_bytes, repeats).bytes_per_s


def launch_latency(device: Device, launches: int = LAUNCHES, repeats: int = REPEATS) -> float:
    """Seconds per tiny kernel (a one-element in-place add) queued back to back: the floor
    under any step made of many small operations."""
    tiny = torch.zeros(1, device=device.torch_device)

    def run() -> None:
        for _ in range(launches):
            tiny.add_(1.0)

    return best_time(device, run, repeats) / launches


def transfer_bandwidth(device: Device, direction: str, pinned: bool,
                       nbytes: int = TRANSFER_BYTES, repeats: int = REPEATS) -> float:
    """Bytes/s of a host-to-device (``h2d``) or device-to-host (``d2h``) copy of ``nbytes``, from
    or into a pinned or a pageable host buffer. Pinned copies are queued (``non_blocking``), as a
    DataLoader with pin_memory does, for at least MIN_WINDOW_S per synchronisation; the closing
    sync counts them."""
    host = torch.ones(nbytes // 4, pin_memory=pinned)
    on_device = torch.ones(nbytes // 4, device=device.torch_device)
    if direction == "h2d":
        def copy() -> None:
            on_device.copy_(host, non_blocking=pinned)
    elif direction == "d2h":
        def copy() -> None:
            host.copy_(on_device, non_blocking=pinned)
    else:
        raise ValueError(f"direction {direction!r}: allowed h2d, d2h")
    return nbytes / time_queued(device, copy, repeats, MIN_WINDOW_S).seconds_per_item
