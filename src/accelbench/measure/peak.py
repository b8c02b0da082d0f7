"""The measured peak FLOP/s of a device: the best rate of large square matrix products, measured
under a precision's own settings (fp32, TF32, bf16, fp16, autocast).

Achieved FLOP/s of a workload means little alone; against what the same device reaches on its
most favourable kernel, in the same precision, it becomes a utilisation. Three rules keep that
ceiling honest:

* **Measured under the case's precision.** A tf32 case is held against the TF32 matmul rate and
  an amp-bf16 case against the bf16-autocast rate, never against fp32; the cache key names the
  settings (dtype, autocast dtype, fp32 matmul precision).
* **Timed without launch and sync overhead.** One product per synchronisation understates a
  fast device (a 4096² bf16 product takes about 0.2 ms on an H100, comparable to launch + sync),
  so the side grows until one product takes ``MIN_PRODUCT_S``, and each repeat queues enough
  products back to back to last ``MIN_REPEAT_S`` with one synchronisation at its end.
* **A ceiling only rises.** A measurement taken while the machine was busy reads low and would
  inflate every ``% peak`` after it, so the cache keeps the best figure seen. It is measured
  again (and kept if higher) when a case beats it or the entry is older than ``MAX_AGE_DAYS``;
  only an explicit ``refresh`` replaces it.

The figures live in ``data_home()/peak_flops.json`` (``ACCELBENCH_PEAK_CACHE`` overrides the
path, so tests can share one measurement).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import torch

from accelbench.devices import Device
from accelbench.engine.precision import Precision, autocast, get_precision, precision_settings
from accelbench.store.jsonfile import write_atomic
from accelbench.store.paths import data_home

CACHE_NAME = "peak_flops.json"
#: 2: keys name the precision settings; entries keep the best figure seen (v1 kept the first).
CACHE_VERSION = 2
#: Sides tried grow from MIN_SIDE by doubling until one product takes MIN_PRODUCT_S.
MIN_SIDE = 256
CPU_MAX_SIDE = 2048
ACCELERATOR_MAX_SIDE = 16384
MIN_PRODUCT_S = 0.02
#: Each repeat queues products back to back for at least this long between two syncs.
MIN_REPEAT_S = 0.1
REPEATS = 5
MAX_AGE_DAYS = 30


def cache_path() -> Path:
    # ACCELBENCH_PEAK_CACHE lets several result folders (e.g. tests) share one measurement.
    override = os.environ.get("ACCELBENCH_PEAK_CACHE")
    return Path(override) if override else data_home() / CACHE_NAME


def as_precision(precision: Precision | torch.dtype | str) -> Precision:
    """A precision from its name, or from a bare dtype (plain tensors of that dtype)."""
    if isinstance(precision, Precision):
        return precision
    if isinstance(precision, str):
        return get_precision(precision)
    return Precision(str(precision).removeprefix("torch."), param_dtype=precision)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def settings_key(precision: Precision | torch.dtype | str) -> str:
    """What the kernels compute in: ``float32``, ``float32,matmul=high`` (TF32 where the device
    has it), ``bfloat16``, ``float32,autocast=bfloat16`` ..."""
    p = as_precision(precision)
    key = _name(p.param_dtype)
    if p.autocast_dtype is not None:
        key += f",autocast={_name(p.autocast_dtype)}"
    if p.param_dtype == torch.float32 and p.autocast_dtype is None and p.matmul != "highest":
        key += f",matmul={p.matmul}"
    return key


def device_fingerprint(device: Device) -> str:
    try:
        return str(device.info().get("name", "unknown"))
    except Exception as error:  # an unreadable description still needs a stable key
        return f"unknown ({type(error).__name__})"


def cache_key(device: Device, precision: Precision | torch.dtype | str) -> str:
    """Device, torch version, precision settings and what the device is (CPU model, GPU name)."""
    return f"{device.name}|torch {torch.__version__}|{settings_key(precision)}|{device_fingerprint(device)}"


def read_cache(path: Path, version: int = CACHE_VERSION) -> dict[str, Any]:
    """The entries of a versioned JSON cache; {} when missing, damaged or another version."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # it is only a cache: measure again
    if not isinstance(data, dict) or data.get("version") != version \
            or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def write_cache(path: Path, entries: dict[str, Any], version: int = CACHE_VERSION) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"version": version, "entries": entries}, indent=1) + "\n")


def _operands(device: Device, precision: Precision, side: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(side, side, generator=generator).to(device.torch_device, precision.param_dtype)
    b = torch.randn(side, side, generator=generator).to(device.torch_device, precision.param_dtype)
    return a, b


def _timed_products(device: Device, precision: Precision, a: torch.Tensor, b: torch.Tensor,
                    count: int) -> float:
    """Seconds for ``count`` products queued back to back, one synchronisation at the end."""
    device.synchronize()
    start = time.perf_counter()
    with autocast(device, precision):
        for _ in range(count):
            torch.mm(a, b)
    device.synchronize()
    return time.perf_counter() - start


def repeats_products(timed: Callable[[int], float], single: float) -> int:
    """How many products one repeat queues so that it lasts MIN_REPEAT_S. Grown by measuring,
    not by dividing: ``single`` includes the launch and sync latency, which a longer queue
    amortises, so dividing by it would stop far short on a device with a slow sync."""
    count, elapsed = 1, single
    while elapsed < MIN_REPEAT_S:
        count = min(count * 8, max(count * 2, math.ceil(count * MIN_REPEAT_S / max(elapsed, 1e-9))))
        elapsed = timed(count)
    return count


@dataclass(frozen=True)
class MatmulTiming:
    flops: float
    side: int
    products_per_sync: int
    repeats: int


def time_matmul(device: Device, precision: Precision | torch.dtype | str,
                       side: int | None = None, repeats: int = REPEATS) -> MatmulTiming:
    """FLOP/s of the fastest repeat of square products under ``precision``'s settings.

    Without ``side``, the side doubles from MIN_SIDE until one product takes MIN_PRODUCT_S (a
    larger side on faster devices). Each repeat runs ``n`` products between two syncs, with n
    chosen so a repeat lasts MIN_REPEAT_S: launch and sync latency are then a small share."""
    p = as_precision(precision)
    largest = CPU_MAX_SIDE if device.is_cpu else ACCELERATOR_MAX_SIDE
    grow = side is None
    side = side or MIN_SIDE
    with precision_settings(p, device):
        while True:
            a, b = _operands(device, p, side)
            _timed_products(device, p, a, b, 1)  # kernel choice, library start, lazy allocation
            # the better of two, so one descheduled product does not stop the growth
            single = min(_timed_products(device, p, a, b, 1) for _ in range(2))
            if not grow or single >= MIN_PRODUCT_S or side * 2 > largest:
                break
            side *= 2
        count = repeats_products(lambda n: _timed_products(device, p, a, b, n), single)
        best = min(_timed_products(device, p, a, b, count) for _ in range(repeats))
        for _ in range(3):
            # a calibration slowed by other processes leaves repeats too short to hide the sync
            if best >= MIN_REPEAT_S / 2:
                break
            count = max(count * 2, math.ceil(count * MIN_REPEAT_S / max(best, 1e-9)))
            best = min(_timed_products(device, p, a, b, count) for _ in range(repeats))
    return MatmulTiming(2.0 * side**3 * count / best, side, count, repeats)


@dataclass(frozen=True)
class PeakFigure:
    """The peak a utilisation was computed against, as stored in each result."""

    flops: float
    key: str
    settings: str
    measured_at: str
    matrix_side: int | None = None
    products_per_sync: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"peak_flops": self.flops, "peak_settings": self.settings,
                "peak_measured_at": self.measured_at, "peak_matrix_side": self.matrix_side,
                "peak_products_per_sync": self.products_per_sync}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _valid(entry: Any) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("flops"), int | float) \
        and not isinstance(entry.get("flops"), bool) and entry["flops"] > 0


def _is_old(entry: dict[str, Any], now: datetime) -> bool:
    try:
        checked = datetime.fromisoformat(str(entry.get("checked_at") or entry["measured_at"]))
    except (KeyError, ValueError):
        return True
    return now - checked > timedelta(days=MAX_AGE_DAYS)


def _figure(key: str, settings: str, entry: dict[str, Any]) -> PeakFigure:
    return PeakFigure(float(entry["flops"]), key, settings, str(entry.get("measured_at", "")),
                      entry.get("matrix_side"), entry.get("products_per_sync"))


def peak_figure(device: Device, precision: Precision | torch.dtype | str = torch.float32, *,
                refresh: bool = False, at_least: float | None = None,
                side: int | None = None) -> PeakFigure:
    """The device's peak FLOP/s under ``precision``: the cached best unless it must be measured.

    Measured when absent, older than MAX_AGE_DAYS, or below ``at_least`` (a case achieved more:
    the ceiling was read at a bad moment); a new reading replaces the cached one only when higher.
    ``refresh`` measures and replaces whatever was cached."""
    path = cache_path()
    key, settings = cache_key(device, precision), settings_key(precision)
    entries = read_cache(path)
    cached = entries.get(key) if _valid(entries.get(key)) else None
    now = _now()
    if cached is not None and not refresh and not _is_old(cached, now) \
            and (at_least is None or cached["flops"] >= at_least):
        return _figure(key, settings, cached)
    timing = time_matmul(device, precision, side)
    measured = timing if isinstance(timing, MatmulTiming) else MatmulTiming(
        float(timing), side or 0, 1, REPEATS)  # tests stand in a timer that returns a float
    return record_measurement(device, precision, measured, replace=refresh)


def record_measurement(device: Device, precision: Precision | torch.dtype | str,
                       measured: MatmulTiming, *, replace: bool = False) -> PeakFigure:
    """Add a fresh reading to the cache: it becomes the peak when higher (or ``replace``)."""
    path = cache_path()
    key, settings = cache_key(device, precision), settings_key(precision)
    entries = read_cache(path)
    cached = entries.get(key) if _valid(entries.get(key)) else None
    stamp = _now().isoformat(timespec="seconds")
    if cached is not None and not replace and cached["flops"] >= measured.flops:
        entry = {**cached, "checked_at": stamp, "last_flops": measured.flops}
    else:
        entry = {"flops": measured.flops, "matrix_side": measured.side,
                 "products_per_sync": measured.products_per_sync, "repeats": measured.repeats,
                 "measured_at": stamp, "checked_at": stamp, "last_flops": measured.flops}
    entries[key] = entry
    write_cache(path, entries)
    return _figure(key, settings, entry)


def measured_peak_flops(device: Device, precision: Precision | torch.dtype | str = torch.float32,
                        *, refresh: bool = False, side: int | None = None) -> float:
    """Peak FLOP/s of ``device`` under ``precision`` (a Precision, its name or a dtype)."""
    return peak_figure(device, precision, refresh=refresh, side=side).flops
