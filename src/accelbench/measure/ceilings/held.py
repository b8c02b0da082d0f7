"""Sustained peaks (the MSMF of mamf-finder): the burst ceilings' work, a window of square
products (``matmul_work``) or of device copies (``copy_work``), held for minutes by the sustained
measurement (``measure/loop/sustained.py``), one series per figure (``roofline --sustained``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from accelbench.devices.numerics import get_precision, precision_settings, unsupported_reason
from accelbench.measure.ceilings.bandwidth import BANDWIDTH_BUFFER_BYTES, time_memory_copy
from accelbench.measure.ceilings.peak import _operands, product_precision, time_matmul
from accelbench.measure.loop.sustained import (
    DEFAULT_INTERVAL_S,
    Progress,
    SustainedSeries,
    Work,
    run_sustained,
)
from accelbench.measure.trackers.interval_sensors import DeviceSensors, SensorReader

if TYPE_CHECKING:
    from accelbench.devices import Device
    from accelbench.devices.numerics import Precision


def matmul_work(device: Device, precision: Precision | torch.dtype | str) -> Work:
    """A window of square products, sized as the burst peak sizes it (``time_matmul``'s side and
    products per synchronisation); it returns the FLOP it did."""
    timing = time_matmul(device, precision, repeats=1)
    p = product_precision(precision)
    a, b = _operands(device, p, timing.side)
    count, flop = timing.products_per_sync, 2.0 * timing.side ** 3 * timing.products_per_sync

    def window() -> float:
        with precision_settings(p, device):
            for _ in range(count):
                torch.mm(a, b)
            device.synchronize()
        return flop

    return window


def copy_work(device: Device, buffer_bytes: int | None = None) -> Work:
    """A window of device-to-device copies, as many per synchronisation as the bandwidth figure
    queues; it returns the bytes moved (each byte read once and written once)."""
    size = buffer_bytes or BANDWIDTH_BUFFER_BYTES
    count = time_memory_copy(device, size, repeats=1).copies_per_sync
    source = torch.ones(size // 4, device=device.torch_device)
    target = torch.empty_like(source)
    moved = 2.0 * source.numel() * 4 * count

    def window() -> float:
        for _ in range(count):
            target.copy_(source)
        device.synchronize()
        return moved

    return window


def run_sustained_peak(work: Work, unit: str, duration_s: float,
                       interval_s: float = DEFAULT_INTERVAL_S,
                       sensors: SensorReader | None = None,
                       progress: Progress | None = None) -> SustainedSeries:
    """A peak held for ``duration_s``: ``work`` is :func:`matmul_work` (unit "FLOP") or
    :func:`copy_work` ("bytes"), run back to back; each interval's rate is FLOP/s or bytes/s."""
    work()  # first use: kernel choice, allocation, before the first timed interval
    return run_sustained(work, duration_s, interval_s, sensors, unit=unit, progress=progress)


def hold_peaks(device: Device, duration_s: float, interval_s: float = DEFAULT_INTERVAL_S,
               precisions: tuple[str, ...] = ("fp32",), sensors: SensorReader | None = None,
               progress: Callable[[str, float, float], None] | None = None) -> dict[str, SustainedSeries]:
    """``roofline --sustained``: each matrix-product peak of ``precisions`` and the bandwidth
    held for ``duration_s``, one after the other, keyed as the roofline's figures
    ("matmul_fp32", "bandwidth"). A precision the device cannot run is left out (the roofline
    says why); the device's sensors are read per interval unless ``sensors`` is given."""
    reader = sensors if sensors is not None else DeviceSensors(device)
    works: dict[str, tuple[Callable[[], Work], str]] = {}
    for name in precisions:
        if not unsupported_reason(device, get_precision(name)):
            works[f"matmul_{name}"] = (functools.partial(matmul_work, device, name), "FLOP")
    works["bandwidth"] = ((lambda: copy_work(device)), "bytes")
    held = {}
    for figure, (make, unit) in works.items():
        report = (lambda done, total, figure=figure: progress(figure, done, total)) if progress else None
        held[figure] = run_sustained_peak(make(), unit, duration_s, interval_s, reader, report)
    return held
