"""Which weight-only quantized kernels each kind of device runs, and the shapes they take.

PyTorch has them in core (``aten``), with one API for CUDA and MPS and another for the CPU
(checked against torch 2.14's ``_meta_registrations.py`` and the kernels' sources):

- int8, every device: ``_weight_int8pack_mm(x, w int8 [n, k], scales [n])`` = ``x @ w.T *
  scales``, x in float32, float16 or bfloat16. MPS asks for n and k multiples of 32
  (``_weight_int8pack_mm_mps``).
- int4 on CUDA and MPS: ``_convert_weight_to_int4pack(w uint8 [n, k/2], inner_k_tiles)`` packs two
  4-bit values a byte (the even column in the high nibble) into tinygemm's tiled int32 layout
  ``[n/8, k/(16 inner_k_tiles), 32, inner_k_tiles/2]``; ``_weight_int4pack_mm(x, packed, group,
  scales_and_zeros [k/group, n, 2])`` computes ``x @ ((q - 8) * scale + zero).T``. CUDA's kernel
  (tinygemm, compute capability 8.0 and later) takes bfloat16 activations only; both need n a
  multiple of 8 and k of 16 x inner_k_tiles (2, 4 or 8).
- int4 on the CPU: ``_convert_weight_to_int4pack_for_cpu(w int32 [n, k], inner_k_tiles)`` gives
  ``uint8 [n, k/2]``; ``_weight_int4pack_mm_for_cpu`` is the same product. It needs n a multiple
  of 16.

Groups of 32, 64, 128 or 256 input channels (the kernels' own set). A layer whose shape a kernel
does not take is left unquantized by the caller (and said so); a device kind without the kernels
(or whose build lacks them) is "unsupported", with the device's own words, from :func:`probe`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from accelbench.devices.base import Device

aten = torch.ops.aten
#: The group sizes the int4 kernels take.
INT4_GROUPS = (32, 64, 128, 256)
INNER_K_TILES = (8, 4, 2)


@dataclass(frozen=True)
class Int8Kernel:
    name: str
    #: (n, k) each must be a multiple of.
    multiple: tuple[int, int] = (1, 1)
    #: gpt-fast's ``WeightOnlyInt8Linear``: ``linear(x, w.to(x.dtype)) * scales``, which inductor
    #: fuses into one kernel that reads the int8 weight (how the published compiled int8 rows
    #: ran); run eager it would write the whole bf16 weight first, so it is for compiled models.
    fused: bool = False

    def matmul(self, x: torch.Tensor, weight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        if self.fused:
            return torch.nn.functional.linear(x, weight.to(x.dtype)) * scales
        return aten._weight_int8pack_mm(x, weight, scales)

    def unfit(self, n: int, k: int) -> str | None:
        """Why a layer of ``n`` outputs and ``k`` inputs cannot take this kernel; None if it can."""
        if n % self.multiple[0] or k % self.multiple[1]:
            return (f"{n} outputs x {k} inputs: {self.name} takes multiples of "
                    f"{self.multiple[0]} x {self.multiple[1]}")
        return None


@dataclass(frozen=True)
class Int4Kernel:
    name: str
    #: The CPU's pair of ops (an int32 [n, k] input to pack) or CUDA's and MPS's (uint8 [n, k/2]).
    cpu_layout: bool
    n_multiple: int
    #: Whether k must be a multiple of 16 x inner_k_tiles (tinygemm's tiles).
    tiled_k: bool
    #: The only activation dtype the kernel takes (CUDA's tinygemm: bfloat16), or None for any.
    activation: torch.dtype | None = None

    def inner_k_tiles(self, k: int) -> int | None:
        if not self.tiled_k:
            return INNER_K_TILES[0]
        return next((t for t in INNER_K_TILES if k % (16 * t) == 0), None)

    def padded_rows(self, n: int) -> int:
        """Rows of zeros that bring ``n`` outputs to the kernel's multiple (GPT-2's 50,257-way
        head takes 7): padded, a layer reads int4's bytes instead of staying in bf16."""
        return -n % self.n_multiple

    def unfit(self, n: int, k: int, group: int, dtype: torch.dtype) -> str | None:
        if group not in INT4_GROUPS or k % group:
            return f"{k} inputs do not split into groups of {group} (groups of {INT4_GROUPS})"
        if n % self.n_multiple:
            return f"{n} outputs: {self.name} takes a multiple of {self.n_multiple}"
        if self.inner_k_tiles(k) is None:
            return f"{k} inputs: {self.name} takes a multiple of 32"
        if self.activation is not None and dtype != self.activation:
            return f"{self.name} takes {self.activation} activations, not {dtype}"
        return None

    def pack(self, values: torch.Tensor) -> torch.Tensor:
        """4-bit values 0..15 as int32 [n, k] (on the device) -> the kernel's packed weight."""
        tiles = self.inner_k_tiles(values.shape[1])
        assert tiles is not None
        if self.cpu_layout:
            return aten._convert_weight_to_int4pack_for_cpu(values.contiguous(), tiles)
        pairs = (values[:, ::2] << 4 | values[:, 1::2]).to(torch.uint8)
        return aten._convert_weight_to_int4pack(pairs.contiguous(), tiles)

    def matmul(self, x: torch.Tensor, packed: torch.Tensor, group: int,
               scales_and_zeros: torch.Tensor) -> torch.Tensor:
        op = aten._weight_int4pack_mm_for_cpu if self.cpu_layout else aten._weight_int4pack_mm
        return op(x, packed, group, scales_and_zeros)


_INT8 = {"cpu": Int8Kernel("aten._weight_int8pack_mm"), "cuda": Int8Kernel("aten._weight_int8pack_mm"),
         "mps": Int8Kernel("aten._weight_int8pack_mm", (32, 32))}
_INT4 = {"cpu": Int4Kernel("aten._weight_int4pack_mm_for_cpu", True, 16, False),
         "cuda": Int4Kernel("aten._weight_int4pack_mm (tinygemm)", False, 8, True, torch.bfloat16),
         "mps": Int4Kernel("aten._weight_int4pack_mm", False, 8, True)}


#: Where inductor fuses FUSED_INT8's cast into the product: its matrix-vector decomposition
#: (torch/_inductor/decomposition.py ``mm``, under the recipe's ``coordinate_descent_tuning``)
#: skips "cpu" and "mps", where the cast writes the whole bf16 weight every step (0.8 tokens/s
#: against PyTorch's int8 kernel's hundreds on the development CPU): those keep the kernel.
_FUSES_DEQUANTIZE = ("cuda", "xpu")
#: int8 in a model that inductor compiles: the dequantise-and-multiply it fuses.
FUSED_INT8 = Int8Kernel("inductor-fused dequantise-and-multiply (gpt-fast WeightOnlyInt8Linear)",
                        fused=True)


def kernel_for(device: Device, bits: int, fused: bool = False) -> Int8Kernel | Int4Kernel | str:
    """The kernel that runs ``bits``-bit weights on ``device``, or why there is none. ``fused``:
    the model is compiled by inductor, so int8 takes the form inductor fuses (FUSED_INT8) where
    it fuses it."""
    kind = torch.device(device.torch_device).type
    table: dict[str, Int8Kernel] | dict[str, Int4Kernel] = _INT8 if bits == 8 else _INT4
    if bits not in (4, 8):
        return f"{bits}-bit weights: accelbench quantizes to 8 or 4 bits"
    if fused and bits == 8 and kind in _FUSES_DEQUANTIZE:
        return FUSED_INT8
    kernel = table.get(kind)
    if kernel is None:
        return (f"int{bits} weight-only on {kind}: accelbench runs PyTorch's kernels on cpu, cuda "
                "and mps only")
    return kernel


def probe(device: Device, bits: int, dtype: torch.dtype, group: int = 128) -> str | None:
    """Try one small quantized product on ``device``; None when it works, else why not (the
    device's own words: no kernel in this build, an old GPU, an old macOS)."""
    kernel = kernel_for(device, bits)
    if isinstance(kernel, str):
        return kernel
    n, k = 64, 256
    try:
        x = torch.ones(1, k, dtype=dtype, device=device.torch_device)
        if isinstance(kernel, Int8Kernel):
            weight = torch.ones(n, k, dtype=torch.int8, device=device.torch_device)
            out = kernel.matmul(x, weight, torch.ones(n, dtype=dtype, device=device.torch_device))
        else:
            reason = kernel.unfit(n, k, group, dtype)
            if reason:
                return f"int4 weight-only on {device.name}: {reason}"
            values = torch.full((n, k), 9, dtype=torch.int32, device=device.torch_device)
            zeros = torch.zeros(k // group, n, 2, dtype=dtype, device=device.torch_device)
            out = kernel.matmul(x, kernel.pack(values), group, zeros)
        out.sum().item()
    except Exception as error:  # the device's own words are the reason
        text = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]
        return f"int{bits} weight-only on {device.name}: {kernel.name}: {text}"
    return None

