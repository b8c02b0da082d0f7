"""The bandwidth ceilings are timed with many copies per synchronisation (issue 19, item 7): one
copy per sync also times the launch and sync latency, ~5% of a 512 MiB copy on an H100 and
15-25% of selftest --quick's 128 MiB one."""

from __future__ import annotations

import time

import pytest
import torch
from fakes import FakeQueueAdapter
from torch.utils._python_dispatch import TorchDispatchMode

from accelbench.devices import Device
from accelbench.measure.ceilings import bandwidth

COPY_S = 0.001
SYNC_S = 0.004


class SlowSyncDevice(FakeQueueAdapter):
    """An asynchronous device whose synchronisation costs SYNC_S on top of waiting for its queue
    (sleep-based: other processes cannot change what it reads); it notes how many copies each
    synchronisation closed."""

    def __init__(self) -> None:
        super().__init__()
        self.copies_since_sync = 0
        self.copies_per_sync: list[int] = []

    def synchronize(self, index: int) -> None:
        super().synchronize(index)
        time.sleep(SYNC_S)
        self.copies_per_sync.append(self.copies_since_sync)
        self.copies_since_sync = 0


class QueuedCopies(TorchDispatchMode):
    """Every tensor copy queues COPY_S of work on the device and returns at once, as a copy
    kernel's launch does."""

    def __init__(self, device: SlowSyncDevice) -> None:
        super().__init__()
        self.device = device

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.copy_.default:
            self.device.enqueue(COPY_S)
            self.device.copies_since_sync += 1
            return args[0]
        return func(*args, **(kwargs or {}))


@pytest.fixture
def slow_sync() -> tuple[SlowSyncDevice, Device]:
    adapter = SlowSyncDevice()
    return adapter, Device(adapter, "fake")


def test_the_memory_bandwidth_is_not_timed_one_copy_per_sync(slow_sync) -> None:
    adapter, device = slow_sync
    buffer_bytes = 2**20
    with QueuedCopies(adapter):
        measured = bandwidth.memory_bandwidth(device, buffer_bytes, repeats=3)
    true_rate = 2 * buffer_bytes / COPY_S  # read + write, one copy every COPY_S
    # one copy per sync reads 1 ms of copy per 5 ms: a fifth of the rate
    assert measured >= 0.85 * true_rate, f"{measured / true_rate:.2f} of the device's rate"
    # the timed windows: at least MIN_WINDOW_S of copies between two syncs
    assert max(adapter.copies_per_sync) >= bandwidth.MIN_WINDOW_S / COPY_S
    with QueuedCopies(adapter):
        timing = bandwidth.time_memory_copy(device, buffer_bytes, repeats=3)
    assert timing.copies_per_sync >= bandwidth.MIN_WINDOW_S / COPY_S
    # each of the 3 timed windows: its copies closed by one sync, none between them
    closing = [copies for copies in adapter.copies_per_sync if copies]
    assert closing[-3:] == [timing.copies_per_sync] * 3


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_transfers_are_not_timed_one_copy_per_sync(slow_sync, direction: str) -> None:
    adapter, device = slow_sync
    nbytes = 2**20
    with QueuedCopies(adapter):
        measured = bandwidth.transfer_bandwidth(device, direction, pinned=False, nbytes=nbytes,
                                                repeats=3)
    assert measured >= 0.85 * nbytes / COPY_S
    assert max(adapter.copies_per_sync) >= bandwidth.MIN_WINDOW_S / COPY_S
