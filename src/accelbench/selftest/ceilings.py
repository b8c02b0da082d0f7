"""Ceiling checks: the matmul FLOP/s per precision and the memory bandwidth accelbench measures
(the roofline, measured afresh and then shared with ``accelbench roofline``) must lie within
plausible bounds: the vendor's figure where the accelerator's whole chip name is in the vendor
table (:mod:`accelbench.devices.datasheets`), else physical bounds.

Above the upper bound is impossible (a timer that under-reads, work that was skipped); below the
lower bound means the measurement did not exercise the device (a timer that over-reads, a
fallback path). Bounds for an unknown CPU: logical cores x the highest clock x the widest FLOPs
per cycle in shipping CPUs (64 fp32 with two AVX-512 FMA units; 1024 bf16/fp16 with AMX).

Physical bounds are loose (1 GFLOP/s to 5 PFLOP/s for an unknown accelerator): a card pinned at a
tenth of its clocks reads within them. A figure judged only by them is never a pass: its status is
``bounds`` and the summary counts it apart. Two checks need no bounds at all, only ratios: bf16
products must beat fp32 ones by what the card's tensor cores promise, and the copy bandwidth must
reach 60-95% of the datasheet's (a copy reaches 80-92% of it on a healthy card; far less is a
degraded link or clock, more a timer that under-reads).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.devices import Device
from accelbench.devices.datasheets import VendorFigures, min_half_to_fp32, vendor_figures
from accelbench.measure.ceilings.peak_clocks import capped_text
from accelbench.measure.ceilings.roofline import MATMUL_PRECISIONS, Roofline
from accelbench.selftest.result import BOUNDS_BASIS, SKIP, VENDOR_BASIS, CheckResult, verdict

GROUP = "peak"
#: Around a vendor figure: boost clocks can beat it a little; a fifth of it is not plausible
#: for a large product or a large copy.
VENDOR_ABOVE, VENDOR_BELOW = 1.10, 0.20
#: The share of the datasheet's memory bandwidth a large copy must reach.
BANDWIDTH_SHARE = (0.60, 0.95)
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
    #: Both ends come from the vendor's figure (else at least one is physical).
    vendor: bool = False


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
                          f"{vendor.source}; {vendor.upper_only_why}: upper bound only")
        return Bounds(VENDOR_BELOW * figure, VENDOR_ABOVE * figure, vendor.source, vendor=True)
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
        if vendor.bandwidth_upper_only:
            return Bounds(MIN_BANDWIDTH, VENDOR_ABOVE * high,
                          f"{vendor.source}; a MIG slice's share of it is not published: upper "
                          "bound only")
        return Bounds(VENDOR_BELOW * low, VENDOR_ABOVE * high, vendor.source, vendor=True)
    if device.is_cpu:
        cores = _cores(info)
        return Bounds(MIN_BANDWIDTH, cores * CPU_BANDWIDTH_PER_CORE,
                      f"{cores} cores x {CPU_BANDWIDTH_PER_CORE / 1e9:g} GB/s")
    return Bounds(MIN_BANDWIDTH, ACCELERATOR_MAX_BANDWIDTH, "unknown accelerator: physical bounds")


def _judge(device: Device, name: str, value: float | None, bounds: Bounds, unit: str,
           scale: float, missing: str, label: str = "") -> CheckResult:
    if value is None or math.isnan(value):
        return CheckResult(GROUP, name, device.name, SKIP, f"not measured: {missing}")
    basis = VENDOR_BASIS if bounds.vendor else BOUNDS_BASIS
    ok = bounds.low <= value <= bounds.high
    return CheckResult(GROUP, name, device.name, verdict(ok, basis),
                       f"{value / scale:,.1f} {unit}{label}; plausible {bounds.low / scale:,.1f}-"
                       f"{bounds.high / scale:,.1f} {unit} ({bounds.basis})",
                       {"value": value, "low": bounds.low, "high": bounds.high}, basis)


def half_ratio_check(device: Device, info: dict, roofline: Roofline) -> CheckResult | None:
    """bf16 products at least as many times faster than fp32 as the card's tensor cores promise
    (a bf16 path that misses them reads about fp32's rate); None where nothing promises it."""
    required = None if device.is_cpu else min_half_to_fp32(info)
    if required is None:
        return None
    ratio_min, why, from_datasheet = required
    name = f"matmul bf16 at least {ratio_min:.1f}x fp32"
    fp32, bf16 = roofline.matmul_flops.get("fp32"), roofline.matmul_flops.get("bf16")
    if not fp32 or not bf16:
        return CheckResult(GROUP, name, device.name, SKIP, "not measured: bf16 or fp32 matmul missing")
    ratio = bf16 / fp32
    return CheckResult(GROUP, name, device.name, verdict(ratio >= ratio_min),
                       f"bf16 {ratio:.1f}x fp32; required {ratio_min:.1f}x ({why})",
                       {"ratio": ratio, "required": ratio_min}, VENDOR_BASIS if from_datasheet else "")


def bandwidth_share_check(device: Device, info: dict, roofline: Roofline) -> CheckResult | None:
    """The copy bandwidth as a share of the datasheet's: BANDWIDTH_SHARE where the datasheet
    gives it (a skip saying so for an accelerator it does not); None on the CPU."""
    if device.is_cpu:
        return None
    low, high = BANDWIDTH_SHARE
    name = f"memory bandwidth {low:.0%}-{high:.0%} of the datasheet's"
    vendor = _vendor(device, info)
    if vendor is None or vendor.bandwidth_upper_only:
        what = "a MIG slice's share" if vendor is not None else "no datasheet bandwidth"
        return CheckResult(GROUP, name, device.name, SKIP,
                           f"not judged: {what} for {info.get('name', device.name)} "
                           "(src/accelbench/devices/datasheets.py)")
    value = roofline.memory_bandwidth_bytes_per_s
    if value is None or math.isnan(value):
        return CheckResult(GROUP, name, device.name, SKIP,
                           f"not measured: {roofline.errors.get('memory_bandwidth', 'unknown')}")
    slowest, fastest = vendor.bandwidth_bytes_per_s
    share = value / slowest if value < slowest else value / fastest
    ok = low * slowest <= value <= high * fastest
    return CheckResult(GROUP, name, device.name, verdict(ok),
                       f"{value / 1e9:,.1f} GB/s, {share:.0%} of {vendor.source}'s "
                       f"{_gb(slowest, fastest)} GB/s", {"value": value, "share": share}, VENDOR_BASIS)


def _gb(low: float, high: float) -> str:
    return f"{low / 1e9:,.0f}" if low == high else f"{low / 1e9:,.0f}-{high / 1e9:,.0f}"


def peak_label(how: dict[str, Any]) -> str:
    """What a matmul figure is (the roofline's method for it): capped while timed (what held the
    clock back, at what clock), and measured beside other work; "" for neither."""
    said = [text for text in (capped_text(how), f"busy: {how['busy']}" if how.get("busy") else "")
            if text]
    return f" ({'; '.join(said)})" if said else ""


def judge_roofline(device: Device, roofline: Roofline) -> list[CheckResult]:
    info = device.info()
    results = [_judge(device, f"matmul {name} FLOP/s within plausible bounds",
                      roofline.matmul_flops.get(name), flops_bounds(device, info, name),
                      "GFLOP/s", 1e9, roofline.errors.get(f"matmul_{name}", "unknown"),
                      peak_label(roofline.method.get(f"matmul_{name}") or {}))
               for name in MATMUL_PRECISIONS]
    buffer = roofline.method.get("bandwidth_buffer_bytes", 0)
    results.append(_judge(
        device, f"memory bandwidth within plausible bounds ({buffer / 2**20:.0f} MiB buffers)",
        roofline.memory_bandwidth_bytes_per_s, bandwidth_bounds(device, info), "GB/s", 1e9,
        roofline.errors.get("memory_bandwidth", "unknown")))
    ratios = (half_ratio_check(device, info, roofline), bandwidth_share_check(device, info, roofline))
    return results + [check for check in ratios if check is not None]


def ceiling_checks(device: Device, quick: bool = False) -> list[Callable[[], list[CheckResult]]]:
    from accelbench.measure.ceilings.roofline import measure_roofline, remember

    def run() -> list[CheckResult]:
        fresh = measure_roofline(device, refresh_peaks=False, fresh=True,
                                 buffer_bytes=(128 if quick else 512) * 2**20)
        remember(fresh, device)  # shared with `accelbench roofline` (best figures kept)
        return judge_roofline(device, fresh)

    return [run]
