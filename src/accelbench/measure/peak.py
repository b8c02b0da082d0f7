"""The measured peak FLOP/s of a device: the best rate of a large square matrix product.

Achieved FLOP/s of a workload means little alone; against what the same device reaches on its
most favourable kernel it becomes a utilisation. The figure is measured once per device, torch
version, dtype and machine, and cached in ``data_home()/peak_flops.json``.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from accelbench.devices import Device
from accelbench.store.jsonfile import write_atomic
from accelbench.store.paths import data_home

CACHE_NAME = "peak_flops.json"
CACHE_VERSION = 1
#: Big enough to saturate the device's matrix units, small enough to finish in about a second.
ACCELERATOR_SIDE = 4096
CPU_SIDE = 2048
REPEATS = 5


def cache_path() -> Path:
    # ACCELBENCH_PEAK_CACHE lets several result folders (e.g. tests) share one measurement.
    override = os.environ.get("ACCELBENCH_PEAK_CACHE")
    return Path(override) if override else data_home() / CACHE_NAME


def cache_key(device: Device, dtype: torch.dtype) -> str:
    """Device, torch version, dtype and what the device is (CPU model or GPU name)."""
    try:
        fingerprint = str(device.info().get("name", "unknown"))
    except Exception as error:  # an unreadable description still needs a stable key
        fingerprint = f"unknown ({type(error).__name__})"
    return f"{device.name}|torch {torch.__version__}|{str(dtype).removeprefix('torch.')}|{fingerprint}"


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: it is only a cache, so measure again
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION \
            or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def time_matmul(device: Device, dtype: torch.dtype, side: int, repeats: int = REPEATS) -> float:
    """FLOP/s of the fastest of ``repeats`` products of two ``side`` x ``side`` matrices."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(side, side, generator=generator).to(device.torch_device, dtype)
    b = torch.randn(side, side, generator=generator).to(device.torch_device, dtype)
    torch.mm(a, b)  # warm-up: kernel selection, library initialisation, lazy allocation
    device.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        device.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2.0 * side**3 / best


def measured_peak_flops(device: Device, dtype: torch.dtype = torch.float32, *,
                        refresh: bool = False, side: int | None = None) -> float:
    """Peak FLOP/s of ``device`` in ``dtype``, from the cache unless ``refresh`` (or absent)."""
    path = cache_path()
    key = cache_key(device, dtype)
    entries = _read_cache(path)
    cached = entries.get(key)
    if not refresh and isinstance(cached, dict) and isinstance(cached.get("flops"), int | float) \
            and cached["flops"] > 0:
        return float(cached["flops"])
    side = side or (CPU_SIDE if device.is_cpu else ACCELERATOR_SIDE)
    flops = time_matmul(device, dtype, side)
    entries[key] = {"flops": flops, "matrix_side": side, "repeats": REPEATS,
                    "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"version": CACHE_VERSION, "entries": entries}, indent=1) + "\n")
    return flops
