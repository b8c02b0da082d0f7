"""Ceiling checks: the matmul FLOP/s per precision and the memory bandwidth accelbench measures
(the roofline, measured afresh and then shared with ``accelbench roofline``) must lie within
plausible bounds: the vendor's figure where the accelerator's whole chip name is in the vendor
table (:mod:`accelbench.selftest.vendor`), else physical bounds.

Above the upper bound is impossible (a timer that under-reads, work that was skipped); below the
lower bound means the measurement did not exercise the device (a timer that over-reads, a
fallback path). Bounds for an unknown CPU: logical cores x the highest clock x the widest FLOPs
per cycle in shipping CPUs (64 fp32 with two AVX-512 FMA units; 1024 bf16/fp16 with AMX).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from accelbench.devices import Device
from accelbench.measure.ceilings.roofline import MATMUL_PRECISIONS, Roofline
from accelbench.selftest.result import SKIP, CheckResult, verdict
from accelbench.selftest.vendor import VendorFigures, vendor_figures

GROUP = "peak"
#: Around a vendor figure: boost clocks can beat it a little; a fifth of it is not plausible
#: for a large product or a large copy.
VENDOR_ABOVE, VENDOR_BELOW = 1.10, 0.20
FLOPS_PER_CYCLE = {"fp32": 64, "tf32": 64, "bf16": 1024, "fp16": 1024}
MAX_CLOCK_HZ = 6.0e9
#: Physical lower bounds: far below any CPU core of the last 15 years, even time-shared.
CPU_MIN_FLOPS_PER_CORE = {"fp32": 1e8, "tf32": 1e8, "bf16": 1e7, "fp16": 1e7}
CPU_BANDWIDTH_PER_CORE = 60e9
ACCELERATOR_MIN_FLOPS, ACCELERATOR_MAX_FLOPS, ACCELERATOR_MAX_BANDWIDTH = 1e9, 5e15, 10e12
MIN_BANDWIDTH = 1e8


@dataclass(frozen=True)
class Bounds:
    low: float
    high: float
    basis: str


def _cores(info: dict) -> int:
    return int(info.get("logical_cores") or info.get("physical_cores") or 1)


def _vendor(device: Device, info: dict) -> VendorFigures | None:
    # Published figures are the GPU's: a Mac's CPU is named like its chip ("Apple M2 Max") but
    # reaches nothing like its GPU's rate.
    return None if device.is_cpu else vendor_figures(str(info.get("name", "")))


def flops_bounds(device: Device, info: dict, precision: str) -> Bounds:
    vendor = _vendor(device, info)
    if vendor is not None and precision in vendor.matmul_flops:
        figure = vendor.matmul_flops[precision]
        if precision in vendor.upper_only:
            return Bounds(ACCELERATOR_MIN_FLOPS, VENDOR_ABOVE * figure,
                          f"{vendor.source}; no published {precision} rate: upper estimate only")
        return Bounds(VENDOR_BELOW * figure, VENDOR_ABOVE * figure, vendor.source)
    if device.is_cpu:
        cores = _cores(info)
        return Bounds(cores * CPU_MIN_FLOPS_PER_CORE[precision],
                      cores * MAX_CLOCK_HZ * FLOPS_PER_CYCLE[precision],
                      f"{cores} cores x {MAX_CLOCK_HZ / 1e9:g} GHz x "
                      f"{FLOPS_PER_CYCLE[precision]} FLOP/cycle")
    basis = "unknown accelerator: physical bounds" if vendor is None \
        else f"no published {precision} figure for the {vendor.chip}: physical bounds"
    return Bounds(ACCELERATOR_MIN_FLOPS, ACCELERATOR_MAX_FLOPS, basis)


def bandwidth_bounds(device: Device, info: dict) -> Bounds:
    vendor = _vendor(device, info)
    if vendor is not None:
        low, high = vendor.bandwidth_bytes_per_s
        return Bounds(VENDOR_BELOW * low, VENDOR_ABOVE * high, vendor.source)
    if device.is_cpu:
        cores = _cores(info)
        return Bounds(MIN_BANDWIDTH, cores * CPU_BANDWIDTH_PER_CORE,
                      f"{cores} cores x {CPU_BANDWIDTH_PER_CORE / 1e9:g} GB/s")
    return Bounds(MIN_BANDWIDTH, ACCELERATOR_MAX_BANDWIDTH, "unknown accelerator: physical bounds")


def _judge(device: Device, name: str, value: float | None, bounds: Bounds, unit: str,
           scale: float, missing: str) -> CheckResult:
    if value is None or math.isnan(value):
        return CheckResult(GROUP, name, device.name, SKIP, f"not measured: {missing}")
    ok = bounds.low <= value <= bounds.high
    return CheckResult(GROUP, name, device.name, verdict(ok),
                       f"{value / scale:,.1f} {unit}; plausible {bounds.low / scale:,.1f}-"
                       f"{bounds.high / scale:,.1f} {unit} ({bounds.basis})",
                       {"value": value, "low": bounds.low, "high": bounds.high})


def judge_roofline(device: Device, roofline: Roofline) -> list[CheckResult]:
    info = device.info()
    results = [_judge(device, f"matmul {name} FLOP/s within plausible bounds",
                      roofline.matmul_flops.get(name), flops_bounds(device, info, name),
                      "GFLOP/s", 1e9, roofline.errors.get(f"matmul_{name}", "unknown"))
               for name in MATMUL_PRECISIONS]
    buffer = roofline.method.get("bandwidth_buffer_bytes", 0)
    results.append(_judge(
        device, f"memory bandwidth within plausible bounds ({buffer / 2**20:.0f} MiB buffers)",
        roofline.memory_bandwidth_bytes_per_s, bandwidth_bounds(device, info), "GB/s", 1e9,
        roofline.errors.get("memory_bandwidth", "unknown")))
    return results


def ceiling_checks(device: Device, quick: bool = False) -> list[Callable[[], list[CheckResult]]]:
    from accelbench.measure.ceilings.roofline import measure_roofline, remember

    def run() -> list[CheckResult]:
        fresh = measure_roofline(device, refresh_peaks=False, fresh=True,
                                 buffer_bytes=(128 if quick else 512) * 2**20)
        remember(fresh, device)  # shared with `accelbench roofline` (best figures kept)
        return judge_roofline(device, fresh)

    return [run]
