"""Work of a known relative size for the timing checks, sized so that the device sets its time.

On an asynchronous device the work must keep the *device* busy, not the host: with small products
(128²) the host's launches take longer than the device's kernels, so a step's time is launch time
and a ``synchronize()`` that does not wait still reads a plausible figure, twice the launches
taking twice the host time. There the product grows until one product's device time is
``DEVICE_BOUND`` times the host's time to queue it (as the peak grows its product until launch and
sync are a small share), and twice the work is twice the rows in the same number of launches:
launch time stays the same, device time doubles, so only a loop that waits for the device reads
2x. On the CPU (synchronous: host time is device time) the products stay at 128² and twice the
work is twice as many.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import torch

from accelbench.devices import Device
from accelbench.measure.loop.clock import synced_seconds

SIDE = 128
#: On an asynchronous device one product must take this many times the host's time to queue it.
DEVICE_BOUND = 10.0
#: The sides tried on an asynchronous device: doubling from the first until device-bound.
MIN_DEVICE_SIDE = 256
MAX_DEVICE_SIDE = 4096
#: At most this many products a step: a sync that does not wait makes products look nearly free,
#: and the broken check must still end soon.
MAX_UNITS = 128


class StepWork(Protocol):
    """Work of a known relative size, for the doubling and window checks."""

    def step(self, units: int) -> Callable[[Any], Any]: ...

    def doubled(self, units: int) -> Callable[[Any], Any]:
        """Twice the work of ``step(units)``."""
        ...

    def units_for(self, seconds: float) -> int: ...

    def describe(self, units: int) -> str: ...


class Work:
    """Steps made of ``units`` square products on the device: work of a known relative size.
    Twice the work is twice as many products (for the CPU, where host time is device time)."""

    def __init__(self, device: Device, side: int = SIDE) -> None:
        generator = torch.Generator().manual_seed(0)
        self.a = torch.randn(side, side, generator=generator).to(device.torch_device)
        # An orthogonal factor keeps the chain's values the same size however long it is: a
        # shrinking chain reaches subnormal numbers, which x86 CPUs compute many times slower.
        self.b = torch.linalg.qr(torch.randn(side, side, generator=generator))[0].to(device.torch_device)
        self.device = device

    def step(self, units: int) -> Callable[[Any], Any]:
        def run(batch: Any) -> Any:
            out = self.a
            for _ in range(units):
                out = torch.mm(out, self.b)
            return out
        return run

    def units_for(self, seconds: float) -> int:
        """How many products make a step of about ``seconds`` on this device now."""
        run = self.step(8)
        run(None)
        # The fastest: a descheduled trial would make the steps too short.
        fastest = min(synced_seconds(self.device, lambda: run(None)) for _ in range(5))
        per_unit = max(fastest / 8, 1e-7)
        return max(1, round(seconds / per_unit))

    def doubled(self, units: int) -> Callable[[Any], Any]:
        return self.step(2 * units)

    def describe(self, units: int) -> str:
        return f"{units} -> {2 * units} units of work"


class DeviceBoundWork:
    """Steps of ``units`` products (rows x side) @ (side x side) on an asynchronous device, one
    product long enough that the device, not the host's launch, sets the step's time. Twice the
    work is the same launches on twice the rows."""

    def __init__(self, device: Device, side: int) -> None:
        # ones @ (ones / side) is ones again, exactly for a power-of-two side: the chain's values
        # neither grow nor shrink, and nothing large is factorised or drawn on the host.
        self.a = torch.ones(2 * side, side, device=device.torch_device)
        self.b = torch.full((side, side), 1.0 / side, device=device.torch_device)
        self.device, self.side = device, side
        self.launch_s, self.product_s = self._product_times()

    @property
    def device_bound(self) -> bool:
        return self.product_s >= DEVICE_BOUND * self.launch_s

    def step(self, units: int, rows: int = 0) -> Callable[[Any], Any]:
        a = self.a[: rows or self.side]

        def run(batch: Any) -> Any:
            out = a
            for _ in range(units):
                out = torch.mm(out, self.b)
            return out
        return run

    def doubled(self, units: int) -> Callable[[Any], Any]:
        return self.step(units, rows=2 * self.side)

    def units_for(self, seconds: float) -> int:
        return min(MAX_UNITS, max(1, round(seconds / max(self.product_s, 1e-7))))

    def describe(self, units: int) -> str:
        bound = "" if self.device_bound else (
            f"; not device-bound at the largest size tried (a product took "
            f"{self.product_s / max(self.launch_s, 1e-9):.1f}x its launch)")
        return (f"{units} products of {self.side}x{self.side} a step, then the same launches on "
                f"{2 * self.side} rows ({self.product_s * 1e3:.2f} ms a product, "
                f"{self.launch_s * 1e6:.0f} us to launch){bound}")

    def _product_times(self, count: int = 8) -> tuple[float, float]:
        """Seconds per product the host takes to queue ``count`` products, and until they are
        done: each the best of three, after one run for kernel choice and allocation."""
        run = self.step(count)
        run(None)
        launches, totals = [], []
        for _ in range(3):
            self.device.synchronize()
            start = time.perf_counter()
            run(None)
            queued = time.perf_counter()
            self.device.synchronize()
            launches.append(queued - start)
            totals.append(time.perf_counter() - start)
        return min(launches) / count, min(totals) / count


def device_bound_work(device: Device, largest: int | None = None) -> DeviceBoundWork:
    """The smallest side (doubling from MIN_DEVICE_SIDE) whose product keeps ``device`` busy
    DEVICE_BOUND times as long as the host takes to queue it; the largest tried if none does
    (a device whose synchronize does not wait never does: its products look as cheap as their
    launches)."""
    side, largest = MIN_DEVICE_SIDE, largest or MAX_DEVICE_SIDE
    while True:
        work = DeviceBoundWork(device, side)
        if work.device_bound or side * 2 > largest:
            return work
        side *= 2


def default_work(device: Device) -> StepWork:
    return device_bound_work(device) if device.is_async else Work(device)
