"""A device's roofline: the ceilings a workload can be held against.

Matrix-product FLOP/s per precision, memory bandwidth, kernel-launch latency and host<->device
transfer rates (pinned and pageable). ``device_roofline`` is the stable entry point: it returns
the cached figures and measures only what is missing or older than the peak's MAX_AGE_DAYS. Like
the peak, the cache keeps the best figure seen (highest rate, lowest latency): a busy moment can
only spoil a ceiling, so a worse reading never replaces a better one.

The matmul figures are the peak cache's (:mod:`accelbench.measure.ceilings.peak`), read afresh whenever
the roofline is returned, so ``% peak`` and the roofline show one figure per precision even after
a case's re-check raised a peak; an amp case is held against its autocast dtype's peak (amp-bf16
against bf16) in both.

The cache is ``roofline.json`` beside the peak cache (``ACCELBENCH_PEAK_CACHE`` moves both).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import torch

from accelbench.devices import Device
from accelbench.devices.numerics import get_precision, unsupported_reason
from accelbench.devices.precisions import MATMUL_PRECISIONS
from accelbench.measure.ceilings import bandwidth, peak
from accelbench.measure.ceilings.peak_keys import device_fingerprint

CACHE_NAME = "roofline.json"
CACHE_VERSION = 1
TRANSFER_KINDS = ("pinned", "pageable")


@dataclass(frozen=True)
class Roofline:
    """Measured ceilings of one device. Rates are per second; a figure that could not be measured
    is absent from its dict (or NaN for the scalars), with the reason in ``errors``."""

    device: str
    device_name: str
    matmul_flops: dict[str, float]
    memory_bandwidth_bytes_per_s: float
    launch_latency_s: float
    h2d_bytes_per_s: dict[str, float]
    d2h_bytes_per_s: dict[str, float]
    measured_at: str
    torch_version: str = torch.__version__
    #: How each figure was measured (buffer sizes, matrix sides, launches).
    method: dict[str, Any] = field(default_factory=dict)
    #: Figure name -> why it is missing (unsupported dtype, no host transfer on the CPU ...).
    errors: dict[str, str] = field(default_factory=dict)
    #: ``roofline --sustained``: figure ("matmul_fp32", "bandwidth") -> the held peak's record
    #: (results/sustained.SustainedRecord.to_dict(): series, burst, sustained, verdict), beside
    #: the burst figures above, never in their place; the latest held run of each figure.
    sustained: dict[str, dict[str, Any]] = field(default_factory=dict)

    def sustained_flops_for(self, precision: str) -> float | None:
        """The sustained matmul rate ``roofline --sustained`` held for a case's precision, or None."""
        held = self.sustained.get(f"matmul_{peak.product_precision(precision).name}")
        value = (held or {}).get("figures", {}).get("sustained")
        return float(value) if isinstance(value, int | float) and value > 0 else None

    def flops_for(self, precision: str) -> float | None:
        """The matmul ceiling for a case's precision (amp-bf16 computes its products in bf16):
        the figure its ``% peak`` is divided by."""
        return self.matmul_flops.get(peak.product_precision(precision).name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Roofline:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


def cache_path() -> Path:
    return peak.cache_path().with_name(CACHE_NAME)


def _key(device: Device) -> str:
    return f"{device.name}|torch {torch.__version__}|{device_fingerprint(device)}"


def _matmul(device: Device, refresh: bool, fresh: bool, method: dict[str, Any],
            errors: dict[str, str]) -> dict[str, float]:
    flops = {}
    for name in MATMUL_PRECISIONS:
        precision = get_precision(name)
        reason = unsupported_reason(device, precision)
        if reason:
            errors[f"matmul_{name}"] = reason
            continue
        try:
            if fresh:  # this reading, whatever the cache holds (it still joins the cache)
                timing, conditions = peak.timed_matmul(device, precision)
                stored = peak.record_measurement(device, precision, timing, conditions=conditions)
                flops[name] = timing.flops
                method[f"matmul_{name}"] = {
                    "matrix_side": timing.side, "products_per_sync": timing.products_per_sync,
                    **timing.clocks.to_dict(), "burst_flops": timing.burst_flops,
                    # the stored mark where this reading became the figure, else its own
                    "busy": stored.busy if stored.flops == timing.flops
                    else peak.busy_reason(device, timing.flops, conditions, None)}
            else:
                cached = peak.peak_figure(device, precision, refresh=refresh)
                flops[name], method[f"matmul_{name}"] = cached.flops, cached.method()
        except Exception as error:  # one dtype failing must not hide the others
            errors[f"matmul_{name}"] = f"{type(error).__name__}: {error}".splitlines()[0]
            continue
    return flops


def _transfers(device: Device, errors: dict[str, str]) -> tuple[dict[str, float], dict[str, float]]:
    h2d: dict[str, float] = {}
    d2h: dict[str, float] = {}
    if device.is_cpu:
        for direction in ("h2d", "d2h"):
            errors[direction] = "the CPU is the host: there is no host-device transfer"
        return h2d, d2h
    for kind in TRANSFER_KINDS:
        if kind == "pinned" and not device.pin_memory:
            errors[f"h2d_{kind}"] = errors[f"d2h_{kind}"] = \
                f"pinned host memory does not speed up copies to {device.name}"
            continue
        for direction, into in (("h2d", h2d), ("d2h", d2h)):
            try:
                into[kind] = bandwidth.transfer_bandwidth(device, direction, kind == "pinned")
            except Exception as error:
                errors[f"{direction}_{kind}"] = f"{type(error).__name__}: {error}".splitlines()[0]
    return h2d, d2h


def measure_roofline(device: Device, *, refresh_peaks: bool = True, fresh: bool = False,
                     buffer_bytes: int | None = None) -> Roofline:
    """Measure every figure now. The matmul rates come through the peak cache: the cached peak
    (measured when absent), re-measured and replaced with ``refresh_peaks``, or with ``fresh``
    this very reading (added to the peak cache, where it counts only if higher)."""
    buffer_bytes = buffer_bytes or bandwidth.BANDWIDTH_BUFFER_BYTES
    method: dict[str, Any] = {"bandwidth_buffer_bytes": buffer_bytes,
                              "launches": bandwidth.LAUNCHES,
                              "transfer_bytes": bandwidth.TRANSFER_BYTES}
    errors: dict[str, str] = {}
    flops = _matmul(device, refresh_peaks, fresh, method, errors)
    scalars = {}
    try:
        copies = bandwidth.time_memory_copy(device, buffer_bytes)
        scalars["memory_bandwidth"] = copies.bytes_per_s
        method["bandwidth_copies_per_sync"] = copies.copies_per_sync
    except Exception as error:
        scalars["memory_bandwidth"] = float("nan")
        errors["memory_bandwidth"] = f"{type(error).__name__}: {error}".splitlines()[0]
    try:
        scalars["launch_latency"] = bandwidth.launch_latency(device)
    except Exception as error:
        scalars["launch_latency"] = float("nan")
        errors["launch_latency"] = f"{type(error).__name__}: {error}".splitlines()[0]
    h2d, d2h = _transfers(device, errors)
    return Roofline(device.name, device_fingerprint(device), flops, scalars["memory_bandwidth"],
                    scalars["launch_latency"], h2d, d2h,
                    datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    method=method, errors=errors)


def _better(new: float, old: Any, lower_is_better: bool = False) -> float:
    if not isinstance(old, int | float) or old != old:  # missing or NaN
        return new
    if new != new:
        return float(old)
    return min(new, old) if lower_is_better else max(new, old)


def merge_best(new: Roofline, old: Roofline | None) -> Roofline:
    """The best of two measurements of one device, figure by figure."""
    if old is None:
        return new

    def best_of(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        return {k: _better(a[k], b.get(k)) if k in a else b[k] for k in {*a, *b}}

    return Roofline(
        new.device, new.device_name, best_of(new.matmul_flops, old.matmul_flops),
        _better(new.memory_bandwidth_bytes_per_s, old.memory_bandwidth_bytes_per_s),
        _better(new.launch_latency_s, old.launch_latency_s, lower_is_better=True),
        best_of(new.h2d_bytes_per_s, old.h2d_bytes_per_s),
        best_of(new.d2h_bytes_per_s, old.d2h_bytes_per_s),
        new.measured_at, new.torch_version, new.method, new.errors,
        {**old.sustained, **new.sustained})


def _cached(device: Device) -> Roofline | None:
    entry = peak.read_cache(cache_path(), CACHE_VERSION).get(_key(device))
    try:
        return Roofline.from_dict(entry) if isinstance(entry, dict) else None
    except TypeError:  # an entry missing a field: measure again
        return None


def cached_sustained_flops(device: Device, precision: str) -> float | None:
    """The sustained matmul rate ``roofline --sustained`` held on ``device`` for ``precision``
    (None where it has not been held here; nothing is measured by asking)."""
    cached = _cached(device)
    return cached.sustained_flops_for(precision) if cached is not None else None


def stored_burst(roofline: Roofline, figure: str) -> float | None:
    """The burst figure the roofline stores for a held figure ("matmul_fp32", "bandwidth"): for a
    matmul, its short burst where one was measured (the windowed peak of a 700 W part is already
    the power-capped rate: a sustained run held against it compares capped with capped), else
    the peak."""
    if figure == "bandwidth":
        value: float | None = roofline.memory_bandwidth_bytes_per_s
    else:
        burst = (roofline.method.get(figure) or {}).get("burst_flops")
        value = float(burst) if isinstance(burst, int | float) \
            else roofline.matmul_flops.get(figure.removeprefix("matmul_"))
    return value if value is not None and value == value and value > 0 else None


def remember_sustained(device: Device, held: dict[str, dict[str, Any]]) -> Roofline:
    """Store held peaks (figure -> SustainedRecord dict, with its share of ``stored_burst``)
    beside the cached roofline's burst figures; the device's roofline (as ``device_roofline``
    returns it) with them."""
    roofline = device_roofline(device)
    stored = remember(dataclasses.replace(roofline, sustained=held), device)
    return with_current_peaks(stored, device)


def cached_bandwidth(device: Device) -> float | None:
    """The memory bandwidth ``accelbench roofline`` measured for ``device`` (bytes/s), or None
    when it has not been measured here (nothing is measured by asking)."""
    cached = _cached(device)
    value = cached.memory_bandwidth_bytes_per_s if cached is not None else None
    return value if value is not None and value == value and value > 0 else None


def _is_old(roofline: Roofline) -> bool:
    try:
        when = datetime.fromisoformat(roofline.measured_at)
    except ValueError:
        return True
    return datetime.now(timezone.utc) - when > timedelta(days=peak.MAX_AGE_DAYS)


def remember(roofline: Roofline, device: Device, *, replace: bool = False) -> Roofline:
    """Merge a fresh measurement into the cache (best figures kept; ``replace`` keeps only the
    new one); return what is stored."""
    merged = roofline if replace else merge_best(roofline, _cached(device))
    path = cache_path()
    entries = peak.read_cache(path, CACHE_VERSION)
    entries[_key(device)] = merged.to_dict()
    peak.write_cache(path, entries, CACHE_VERSION)
    return merged


def with_current_peaks(roofline: Roofline, device: Device) -> Roofline:
    """``roofline`` with each matmul figure the peak cache holds now (the figure ``% peak`` uses:
    a case's re-check may have raised it since the roofline was measured)."""
    flops, method = dict(roofline.matmul_flops), dict(roofline.method)
    for name in MATMUL_PRECISIONS:
        figure = peak.cached_figure(device, name)
        if figure is not None:
            flops[name] = figure.flops
            method[f"matmul_{name}"] = figure.method()
    return dataclasses.replace(roofline, matmul_flops=flops, method=method)


def device_roofline(device: Device, *, refresh: bool = False) -> Roofline:
    """The device's roofline: cached, or measured (about ten seconds on a CPU) when absent or
    old, and merged with the cached one (best figures kept). ``refresh`` measures everything
    again, the matmul peaks included, and replaces what was cached. The matmul figures are the
    peak cache's as it stands now, a peak measured beside other work measured again first."""
    cached = _cached(device)
    if cached is None or refresh or _is_old(cached):
        cached = remember(measure_roofline(device, refresh_peaks=refresh), device, replace=refresh)
    else:
        _remeasure_busy_peaks(device)
    return with_current_peaks(cached, device)


def _remeasure_busy_peaks(device: Device) -> None:
    """A matmul peak measured beside other work is measured again (once the machine is quiet)
    before the roofline shows it: the peak's lookup does that (``peak.peak_figure``)."""
    for name in MATMUL_PRECISIONS:
        entry = peak.read_cache(peak.cache_path()).get(peak.cache_key(device, name))
        if isinstance(entry, dict) and entry.get("busy"):
            # a measurement that fails leaves the figure as it was: the roofline still shows it
            with contextlib.suppress(Exception):
                peak.peak_figure(device, name)
