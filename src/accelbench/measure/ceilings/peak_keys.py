"""Where the matmul peak is cached and under what key: the cache file (``data_home()/
peak_flops.json``, or ``ACCELBENCH_PEAK_CACHE``, shared with the roofline's), a versioned JSON of
entries, each keyed by device, torch version, precision settings and what the device is. The
settings are the products' own: an autocast precision's peak is its autocast dtype's plain
products (amp-bf16 and bf16 share one).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from accelbench.devices import Device
from accelbench.devices.numerics import PRECISIONS, Precision, get_precision
from accelbench.files import data_home, write_atomic

CACHE_NAME = "peak_flops.json"
#: 2: keys name the precision settings; entries keep the best figure seen (v1 kept the first).
CACHE_VERSION = 2


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


def product_precision(precision: Precision | torch.dtype | str) -> Precision:
    """The precision whose products the peak times: itself, or for an autocast precision the
    plain precision of its autocast dtype (amp-bf16 -> bf16), whose operands are cast once,
    before timing."""
    p = as_precision(precision)
    if p.autocast_dtype is None:
        return p
    dtype = p.autocast_dtype
    return next((q for q in PRECISIONS.values() if q.param_dtype == dtype and q.autocast_dtype is None
                 and q.matmul == p.matmul), Precision(_name(dtype), param_dtype=dtype, matmul=p.matmul))


def settings_key(precision: Precision | torch.dtype | str) -> str:
    """What the kernels compute in: ``float32``, ``float32,matmul=high`` (TF32 where the device
    has it), ``bfloat16`` (bf16 and amp-bf16 alike) ..."""
    p = product_precision(precision)
    key = _name(p.param_dtype)
    if p.param_dtype == torch.float32 and p.matmul != "highest":
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
