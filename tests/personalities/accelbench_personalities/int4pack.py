"""The device kernels of weight-only int4, which a CPU has no kernel for: CUDA's tinygemm and
MPS's ``_convert_weight_to_int4pack`` / ``_weight_int4pack_mm`` (the CPU has a pair of its own,
``..._for_cpu``). An emulated CUDA or MPS device runs them here, as the kernels define them
(aten/src/ATen/native/cuda/int4mm.cu, aten/src/ATen/native/mps/operations/Quantized.mm, torch
2.14; shapes from torch/_meta_registrations.py):

- pack: ``uint8 [n, k/2]`` (two 4-bit values a byte, the even column in the high nibble) to
  ``int32 [n/8, k/(16 t), 32, t/2]`` for ``t`` (inner k tiles) of 2, 4 or 8, n a multiple of 8
  and k of 16 t. The real layout is tiled for the kernel; here the bytes are kept in order (the
  same byte count), which only this module reads back;
- product: ``x [m, k] @ ((q - 8) * scale + zero).T`` with ``scales_and_zeros [k/group, n, 2]``,
  groups of 32, 64, 128 or 256; CUDA's tinygemm takes bfloat16 activations only.
"""

from __future__ import annotations

from typing import Any

import torch

aten = torch.ops.aten


def _pack(w: torch.Tensor, inner_k_tiles: int) -> torch.Tensor:
    if w.dim() != 2 or w.dtype != torch.uint8:
        raise RuntimeError("_convert_weight_to_int4pack : expect weight to be kByte 2D tensor.")
    if inner_k_tiles not in (2, 4, 8):
        raise RuntimeError(f"_convert_weight_to_int4pack : innerKTiles need to be 2, 4, or 8, got "
                           f"{inner_k_tiles}")
    n, k = w.shape[0], w.shape[1] * 2
    if n % 8 or k % (inner_k_tiles * 16):
        raise RuntimeError(f"_convert_weight_to_int4pack : expect N ({n}) to be a multiple of 8 and "
                           f"K ({k}) of {inner_k_tiles * 16}")
    return w.contiguous().view(torch.int32).reshape(n // 8, k // (inner_k_tiles * 16), 32,
                                                    inner_k_tiles // 2).clone()


def _product(x: torch.Tensor, packed: torch.Tensor, group: int, scales_and_zeros: torch.Tensor,
             activation: torch.dtype | None) -> torch.Tensor:
    if activation is not None and x.dtype != activation:
        raise RuntimeError(f"_weight_int4pack_mm_cuda : expect A to be {str(activation)[6:]} "
                           "tensor.")
    if group not in (32, 64, 128, 256):
        raise RuntimeError(f"_weight_int4pack_mm : expect qGroupSize to be 32, 64, 128 or 256, got {group}")
    n, k = packed.shape[0] * 8, x.shape[1]
    pairs = packed.contiguous().reshape(-1).view(torch.uint8).reshape(n, k // 2)
    q = torch.empty(n, k, dtype=torch.float32)
    q[:, ::2], q[:, 1::2] = (pairs >> 4).float(), (pairs & 0xF).float()
    sz = scales_and_zeros.float().transpose(0, 1)  # [n, k/group, 2]
    weight = ((q.reshape(n, k // group, group) - 8) * sz[..., :1] + sz[..., 1:]).reshape(n, k)
    return (x.float() @ weight.t()).to(x.dtype)


def kernels(activation: torch.dtype | None) -> dict[Any, Any]:
    """The emulated ops by aten overload, for a device whose int4 product takes ``activation``
    only (CUDA: bfloat16) or any float (None: MPS)."""
    def product(x: torch.Tensor, packed: torch.Tensor, group: int, sz: torch.Tensor) -> torch.Tensor:
        return _product(x, packed, group, sz, activation)
    return {aten._convert_weight_to_int4pack.default: _pack, aten._weight_int4pack_mm.default: product}
