"""TF32 as an Ampere (or later) GPU computes fp32 products: the inputs' mantissas rounded to 10
bits, the products and sums in fp32.

Which flags decide, read at the moment of each op (torch 2.14.1, aten/src/ATen/Context.cpp):

- cuBLAS products (mm, addmm, bmm, baddbmm, addbmm, _addmm_activation; ``linear``, ``matmul``,
  ``einsum`` and attention's math path reach these): ``Context::allowTF32CuBLAS()``, in Python
  ``torch._C._get_cublas_allow_tf32()``. It is true when ``float32Precision("cuda", "matmul")``
  is ``tf32``: set by ``torch.set_float32_matmul_precision("high"|"medium")``,
  ``torch.backends.cuda.matmul.allow_tf32 = True`` or the newer
  ``torch.backends.cuda.matmul.fp32_precision = "tf32"`` (or ``torch.backends.fp32_precision``
  with the matmul entry left at "none"). If the legacy and the new settings disagree, torch
  raises from this very call, on the GPU as here.
- cuDNN convolutions (forward and both backward products): ``Context::allowTF32CuDNN(CONV)``,
  in Python ``torch._C._get_fp32_precision_getter("cuda", "conv") == "tf32"`` (the resolved
  value: "none" inherits ``cuda/all``, then ``generic/all``; an unset conv entry falls back to
  the legacy switch ``torch.backends.cudnn.allow_tf32``, **True by default**).
  ``torch.backends.cudnn.allow_tf32 = False`` sets conv and rnn to "none" and the legacy switch to
  False; ``torch.backends.cudnn.conv.fp32_precision = "ieee"`` turns only convolutions off.
  With ``torch.backends.cudnn.enabled = False`` convolutions run torch's own CUDA kernels over
  cuBLAS products, so the cuBLAS flag decides.

complex64 operands are rounded part by part (CUDA runs complex convolutions as real ones and
complex products in cuBLAS with the same math mode).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._C import _DisableTorchDispatch

aten = torch.ops.aten

#: Ops whose fp32 operands cuBLAS rounds (name of the overload packet: all overloads, out= too).
MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "_addmm_activation",
                        "addmm_", "baddbmm_", "addbmm_"})
CONV_OPS = frozenset({"convolution", "convolution_backward"})
#: Positions of each op's rounded operands (a bias or an accumulator is added in fp32).
OPERANDS = {
    "mm": (0, 1), "bmm": (0, 1), "addmm": (1, 2), "baddbmm": (1, 2), "addbmm": (1, 2),
    "_addmm_activation": (1, 2), "addmm_": (1, 2), "baddbmm_": (1, 2), "addbmm_": (1, 2),
    "convolution": (0, 1), "convolution_backward": (0, 1, 2),
}
_KINDS = (torch.float32, torch.complex64)


def round_to_tf32(tensor: torch.Tensor) -> torch.Tensor:
    """fp32 values with the mantissa rounded to 10 bits, to nearest, ties to even (as cuBLAS and
    cuDNN convert fp32 operands for TF32 tensor cores); inf and NaN pass unchanged. A plain CPU
    tensor of ``tensor``'s shape and memory format."""
    with _DisableTorchDispatch():
        if tensor.dtype == torch.complex64:
            parts = _round(torch.view_as_real(tensor.resolve_conj()).contiguous())
            return torch.view_as_complex(parts)
        return _round(tensor)


def _round(tensor: torch.Tensor) -> torch.Tensor:
    dense = tensor.contiguous()
    bits = dense.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    lsb = (bits >> 13) & 1
    rounded = (bits + 0xFFF + lsb) & 0xFFFFE000
    rounded = torch.where(torch.isfinite(dense), rounded, bits)
    rounded = torch.where(rounded >= 2**31, rounded - 2**32, rounded)
    out = rounded.to(torch.int32).view(torch.float32)
    if tensor.dim() == 4 and not tensor.is_contiguous() \
            and tensor.is_contiguous(memory_format=torch.channels_last):
        out = out.contiguous(memory_format=torch.channels_last)
    return out


def matmul_allows_tf32() -> bool:
    return bool(torch._C._get_cublas_allow_tf32())


def conv_allows_tf32() -> bool:
    if not torch._C._get_cudnn_enabled():
        return matmul_allows_tf32()
    return torch._C._get_fp32_precision_getter("cuda", "conv") == "tf32"


def flags_now() -> dict[str, Any]:
    """The switches as they were when an op was rounded (for the journal)."""
    getter = torch._C._get_fp32_precision_getter
    return {"cuda.matmul": getter("cuda", "matmul"), "cuda.conv": getter("cuda", "conv"),
            "cudnn.enabled": bool(torch._C._get_cudnn_enabled())}


def kind_of(func: Any) -> str | None:
    """"matmul", "conv" or None: whether TF32 can apply to this op at all."""
    name = func.overloadpacket.__name__
    if name in MATMUL_OPS:
        return "matmul"
    if name in CONV_OPS:
        return "conv"
    return None


def rounded_args(func: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """``args`` with the operands rounded when this op's flag allows TF32 now; None when the
    op runs exact (not a product or convolution, not fp32, or the flag forbids it)."""
    kind = kind_of(func)
    if kind is None:
        return None
    positions = [i for i in OPERANDS[func.overloadpacket.__name__] if i < len(args)]
    if not positions or not all(isinstance(args[i], torch.Tensor) and args[i].dtype in _KINDS
                                for i in positions):
        return None
    allowed = matmul_allows_tf32() if kind == "matmul" else conv_allows_tf32()
    if not allowed:
        return None
    out = list(args)
    for i in positions:
        out[i] = round_to_tf32(args[i])
    return tuple(out)
