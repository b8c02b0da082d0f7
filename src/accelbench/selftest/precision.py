"""Precision checks: the precision a case is labelled with is the arithmetic it ran.

* fp32 vs tf32: the same product under accelbench's ``fp32`` and ``tf32`` settings (with the
  device's own switches: oneDNN's on XPU) must differ where the device has TF32 (CUDA compute
  capability 8.0 and later; an Intel GPU whose adapter says so) and be bit-identical where it has
  none: "tf32" on a device without TF32 is fp32, and an "fp32" that differs is not fp32.
* autocast: under ``amp-bf16`` / ``amp-fp16`` a product and a linear layer must come out in the
  autocast dtype; where the device cannot autocast in that dtype the check is skipped with why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from accelbench.devices import Device
from accelbench.devices.numerics import (
    Precision,
    autocast,
    get_precision,
    precision_settings,
    unsupported_reason,
)
from accelbench.selftest.result import SKIP, CheckResult, verdict

GROUP = "precision"
Settings = Callable[[Precision, Device], contextlib.AbstractContextManager[Any]]
Autocast = Callable[[Device, Precision], contextlib.AbstractContextManager[Any]]


def tf32_expected(info: dict[str, Any]) -> bool:
    """TF32 exists where the adapter says so (``tf32`` in its info: XPU, whose oneDNN kernels run
    TF32 on the DPAS units), and on NVIDIA GPUs of compute capability 8.0 (Ampere) and later."""
    if "tf32" in info:
        return bool(info["tf32"])
    capability = str(info.get("compute_capability") or "")
    if not capability or info.get("hip_version"):
        return False
    try:
        return int(capability.split(".")[0]) >= 8
    except ValueError:
        return False


def check_tf32(device: Device, settings: Settings = precision_settings) -> CheckResult:
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(512, 512, generator=generator).to(device.torch_device)
    b = torch.randn(512, 512, generator=generator).to(device.torch_device)
    results = {}
    for name in ("fp32", "tf32"):
        with settings(get_precision(name), device):
            results[name] = torch.mm(a, b).cpu()
    scale = float(results["fp32"].abs().max())
    difference = float((results["tf32"] - results["fp32"]).abs().max()) / max(scale, 1e-30)
    expected = tf32_expected(device.info())
    differs = difference > 0
    name = "fp32 and tf32 differ where TF32 exists, identical where not"
    where = "TF32 exists here" if expected else "no TF32 here"
    seen = f"max relative difference {difference:.2e}"
    if expected == differs:
        return CheckResult(GROUP, name, device.name, verdict(True), f"{where}: {seen}",
                           {"relative_difference": difference, "tf32_expected": expected})
    why = ("the tf32 switch changes nothing" if expected
           else "fp32 is not fp32 (or tf32 changed numbers on a device without TF32)")
    return CheckResult(GROUP, name, device.name, verdict(False), f"{where} but {seen}: {why}",
                       {"relative_difference": difference, "tf32_expected": expected})


def check_autocast(device: Device, precision_name: str, cast: Autocast = autocast) -> CheckResult:
    precision = get_precision(precision_name)
    name = f"{precision_name} autocast computes in {str(precision.autocast_dtype)[6:]}"
    reason = unsupported_reason(device, precision)
    if reason:
        return CheckResult(GROUP, name, device.name, SKIP, f"not supported here: {reason}")
    x = torch.randn(8, 16).to(device.torch_device)
    layer = torch.nn.Linear(16, 4).to(device.torch_device)
    with cast(device, precision):
        dtypes = {"matmul": torch.mm(x, x.T).dtype, "linear": layer(x).dtype}
    ok = all(dtype == precision.autocast_dtype for dtype in dtypes.values())
    seen = ", ".join(f"{op} -> {str(dtype)[6:]}" for op, dtype in dtypes.items())
    return CheckResult(GROUP, name, device.name, verdict(ok),
                       f"{seen} (fp32 inputs and weights)",
                       {"dtypes": {op: str(dtype) for op, dtype in dtypes.items()}})


def precision_checks(device: Device, quick: bool = False) -> list[Callable[[], CheckResult]]:
    return [lambda: check_tf32(device), lambda: check_autocast(device, "amp-bf16"),
            lambda: check_autocast(device, "amp-fp16")]
