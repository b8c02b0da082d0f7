"""Numeric precision and memory-format settings of a case, applied the same way on every device.

| name      | parameters and inputs | matmul precision | autocast | gradient scaler |
|-----------|-----------------------|------------------|----------|-----------------|
| fp32      | float32               | "highest"        | no       | no              |
| tf32      | float32               | "high" (TF32 where the device has it) | no | no |
| bf16      | bfloat16              | "highest"        | no       | no              |
| fp16      | float16               | "highest"        | no       | no              |
| amp-bf16  | float32               | "highest"        | bfloat16 | no              |
| amp-fp16  | float32               | "highest"        | float16  | yes             |
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from accelbench.devices import Device
from accelbench.errors import UsageError


@dataclass(frozen=True)
class Precision:
    name: str
    param_dtype: torch.dtype = torch.float32
    autocast_dtype: torch.dtype | None = None
    grad_scaler: bool = False
    matmul: str = "highest"


PRECISIONS: dict[str, Precision] = {
    p.name: p for p in (
        Precision("fp32"),
        Precision("tf32", matmul="high"),
        Precision("bf16", param_dtype=torch.bfloat16),
        Precision("fp16", param_dtype=torch.float16),
        Precision("amp-bf16", autocast_dtype=torch.bfloat16),
        Precision("amp-fp16", autocast_dtype=torch.float16, grad_scaler=True),
    )
}


def get_precision(name: str) -> Precision:
    try:
        return PRECISIONS[name]
    except KeyError:
        raise UsageError(f"unknown precision {name!r}; allowed: {', '.join(PRECISIONS)}") from None


def prepare_model(model: nn.Module, precision: Precision, channels_last: bool) -> nn.Module:
    if precision.param_dtype != torch.float32:
        model = model.to(precision.param_dtype)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def prepare_batch(batch: tuple[torch.Tensor, ...], precision: Precision,
                  channels_last: bool) -> tuple[torch.Tensor, ...]:
    out = []
    for tensor in batch:
        if tensor.is_floating_point() and tensor.dtype != precision.param_dtype:
            tensor = tensor.to(precision.param_dtype)
        if channels_last and tensor.dim() == 4:
            tensor = tensor.contiguous(memory_format=torch.channels_last)
        out.append(tensor)
    return tuple(out)


def autocast(device: Device, precision: Precision) -> contextlib.AbstractContextManager[object]:
    if precision.autocast_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.torch_device.split(":")[0],
                          dtype=precision.autocast_dtype)


def grad_scaler(device: Device, precision: Precision) -> torch.amp.GradScaler | None:
    if not precision.grad_scaler:
        return None
    return torch.amp.GradScaler(device.torch_device.split(":")[0])


@contextlib.contextmanager
def matmul_precision(precision: Precision) -> Iterator[None]:
    """Set torch's float32 matmul precision for the case and restore the previous setting."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision.matmul)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def unsupported_reason(device: Device, precision: Precision) -> str | None:
    """Try the precision's basic operations on the device; None when they work."""
    kind = device.torch_device.split(":")[0]
    try:
        if precision.autocast_dtype is not None:
            if not torch.amp.is_autocast_available(kind):
                return f"autocast is not available on device type {kind!r}"
            with torch.autocast(device_type=kind, dtype=precision.autocast_dtype):
                torch.ones(4, 4, device=device.torch_device) @ torch.ones(4, 4,
                                                                          device=device.torch_device)
        dtype = precision.param_dtype
        x = torch.ones(4, 4, device=device.torch_device, dtype=dtype)
        (x @ x).sum().item()
    except Exception as error:  # the device's own words are the reason
        return f"{precision.name} on {device.name}: {type(error).__name__}: {error}".splitlines()[0]
    return None
