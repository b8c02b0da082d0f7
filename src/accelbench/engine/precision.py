"""Numeric precision and memory-format settings of a case, applied the same way on every device.

| name      | parameters and inputs | fp32 matmul and cuDNN convolution      | autocast | gradient scaler |
|-----------|-----------------------|----------------------------------------|----------|-----------------|
| fp32      | float32               | full fp32 ("highest", cuDNN TF32 off)  | no       | no              |
| tf32      | float32               | TF32 where the device has it ("high", cuDNN TF32 on) | no | no    |
| bf16      | bfloat16              | full fp32                              | no       | no              |
| fp16      | float16               | full fp32                              | no       | no              |
| amp-bf16  | float32               | full fp32 (ops autocast leaves in fp32) | bfloat16 | no             |
| amp-fp16  | float32               | full fp32 (ops autocast leaves in fp32) | float16  | yes            |

torch's own defaults are mixed (matmul "highest" but ``torch.backends.cudnn.allow_tf32 = True``),
so a convolution labelled fp32 would run TF32 on Ampere and later: :func:`precision_settings` sets
both switches for every case and restores them afterwards; :func:`backend_flags` records them.
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

    @property
    def tf32(self) -> bool:
        """TF32 for fp32 matmuls and cuDNN convolutions (only the ``tf32`` precision)."""
        return self.matmul != "highest"


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
def precision_settings(precision: Precision) -> Iterator[None]:
    """Set the fp32 matmul precision and cuDNN's TF32 switch for the case; restore both after.

    The switches are process-wide and read by kernels at launch, so everything the case runs
    (``run``'s steps and ``check``'s candidate alike) must happen inside this block.
    """
    previous = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision(precision.matmul)
    torch.backends.cudnn.allow_tf32 = precision.tf32
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous[0])
        torch.backends.cudnn.allow_tf32 = previous[1]


#: The runner's older name for :func:`precision_settings`.
matmul_precision = precision_settings


def backend_flags() -> dict[str, object]:
    """The global numeric switches in force now (call it inside :func:`precision_settings`), for
    the result: they decide whether an "fp32" figure is fp32 and whether it is reproducible."""
    matmul = torch.backends.cuda.matmul
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": bool(matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "cuda_matmul_fp16_reduced_precision_reduction":
            bool(matmul.allow_fp16_reduced_precision_reduction),
        "cuda_matmul_bf16_reduced_precision_reduction":
            bool(matmul.allow_bf16_reduced_precision_reduction),
    }


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
