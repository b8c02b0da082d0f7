"""Weight-only quantization of a model's linear layers for generation (``int8-wo``, ``int4-wo``).

What gpt-fast's ``quantize.py`` and torchao's ``Int8WeightOnlyConfig`` / ``Int4WeightOnlyConfig``
do, through the kernels PyTorch has in core (``devices/quantized.py`` says which each device runs):

- int8: symmetric per output channel: ``scale = max|w| / 127.5`` over the row, ``q =
  round(w / scale)`` clamped to -128..127; the product is ``x @ q.T * scale``;
- int4: asymmetric per group of ``group_size`` input channels (torchao's and tinygemm's
  convention): ``scale = (max - min) / 15``, ``zero = min + 8 scale``, ``q = round((w - min) /
  scale)`` in 0..15; the product reads ``(q - 8) * scale + zero``.

Scales and zero points are kept in the activation dtype (bfloat16). Every linear layer is
quantized, the output layer included (a tied one gets a packed copy of its own; the embedding
keeps its table for the row lookups), as gpt-fast and torchao quantize every ``nn.Linear``.
transformers' ``Conv1D`` (GPT-2's layers: ``x @ W + b`` with W stored (in, out)) is a linear layer
too. A layer whose shape the device's kernel does not take stays in the model's dtype, named in
the report with the reason; a layer with fewer inputs than the group uses the largest group that
splits them, named too. Never silently.

The report carries the bytes the quantized model holds, measured on its tensors (each storage
once, packed weights, scales and zero points included), beside the bytes of the packed layers
alone.
"""

from __future__ import annotations

import torch
from torch import nn

from accelbench.devices import Device
from accelbench.devices.precisions import precision_spec
from accelbench.devices.quantized import INT4_GROUPS, Int4Kernel, Int8Kernel, kernel_for
from accelbench.measure.generation.decode_bytes import FUSED_READ
from accelbench.measure.generation.quantization import Quantization
from accelbench.measure.generation.quantized_layers import linear_layers, tensor_bytes, untie_output

#: The smallest scale a group or channel may have (an all-equal group would divide by zero).
MIN_SCALE = 1e-6


# --- the arithmetic ---------------------------------------------------------------------------
def int8_weights(weight: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 [n, k], scales [n] in ``dtype``) of a weight [n, k]: symmetric per output channel."""
    w = weight.float()
    scales = (w.abs().amax(dim=1) / 127.5).clamp(min=MIN_SCALE)
    q = torch.round(w / scales[:, None]).clamp(-128, 127).to(torch.int8).contiguous()
    return q, scales.to(dtype)


def int4_weights(weight: torch.Tensor, group: int,
                 dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(4-bit values 0..15 as int32 [n, k], scales and zero points [k / group, n, 2] in ``dtype``)
    of a weight [n, k]: asymmetric per group of ``group`` input channels."""
    n, k = weight.shape
    w = weight.float().reshape(n, k // group, group)
    low, high = w.amin(dim=2, keepdim=True), w.amax(dim=2, keepdim=True)
    scales = ((high - low) / 15).clamp(min=MIN_SCALE)
    values = torch.round((w - low) / scales).clamp(0, 15).to(torch.int32).reshape(n, k)
    zeros = low + 8 * scales
    packed = torch.cat([scales, zeros], dim=2).transpose(0, 1).contiguous()  # [k/g, n, 2]
    return values, packed.to(dtype)


def dequantized_int4(values: torch.Tensor, scales_and_zeros: torch.Tensor, group: int) -> torch.Tensor:
    """The float32 weight [n, k] an int4 product reads: ``(q - 8) * scale + zero``."""
    n, k = values.shape
    sz = scales_and_zeros.float().transpose(0, 1)  # [n, k/g, 2]
    q = values.float().reshape(n, k // group, group)
    return ((q - 8) * sz[..., :1] + sz[..., 1:]).reshape(n, k)


# --- the layers -------------------------------------------------------------------------------
class _QuantizedLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        out = self._product(x.reshape(-1, self.in_features).contiguous())
        out = out.reshape(*shape[:-1], self.out_features)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


class Int8WeightOnlyLinear(_QuantizedLinear):
    # Buffers (registered in __init__; nn.Module's attribute lookup finds them).
    weight: torch.Tensor
    scales: torch.Tensor

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, kernel: Int8Kernel) -> None:
        super().__init__(weight.shape[1], weight.shape[0], bias)
        q, scales = int8_weights(weight, weight.dtype)
        if kernel.fused:  # inductor reads it once, as stored: decode_bytes counts it so
            setattr(q, FUSED_READ, True)
        self.register_buffer("weight", q)
        self.register_buffer("scales", scales)
        self.kernel = kernel

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        return self.kernel.matmul(x, self.weight, self.scales)


class Int4WeightOnlyLinear(_QuantizedLinear):
    """``padded_rows`` rows of zeros complete the outputs to the kernel's multiple; the product's
    extra columns are dropped."""

    # Buffers, as Int8WeightOnlyLinear's.
    weight: torch.Tensor
    scales_and_zeros: torch.Tensor

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, kernel: Int4Kernel,
                 group: int, padded_rows: int = 0) -> None:
        super().__init__(weight.shape[1], weight.shape[0], bias)
        if padded_rows:
            weight = torch.cat([weight, weight.new_zeros(padded_rows, weight.shape[1])])
        values, scales_and_zeros = int4_weights(weight, group, weight.dtype)
        self.register_buffer("weight", kernel.pack(values))
        self.register_buffer("scales_and_zeros", scales_and_zeros)
        self.kernel, self.group, self.padded_rows = kernel, group, padded_rows

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        out = self.kernel.matmul(x, self.weight, self.group, self.scales_and_zeros)
        return out[:, :self.out_features] if self.padded_rows else out


def _group_for(k: int, asked: int) -> int | None:
    """The group size a layer with ``k`` inputs gets: ``asked``, or the largest of the kernels'
    groups below it that splits ``k``."""
    return next((g for g in sorted(INT4_GROUPS, reverse=True) if g <= asked and k % g == 0), None)


@torch.no_grad()
def quantize_weights(model: nn.Module, precision: str, device: Device,
                     fused: bool = False) -> Quantization:
    """Replace every linear layer of ``model`` (on ``device``, in its activation dtype) by its
    weight-only quantized form, in place. ``fused``: the model will be compiled by inductor, so
    int8 takes gpt-fast's dequantise-and-multiply form, which inductor fuses (the kernel the
    report names says which ran). Raises NotImplementedError (the case's status: unsupported)
    where the device has no kernel for the precision."""
    spec = precision_spec(precision)
    if spec.weight_bits is None:
        raise ValueError(f"{precision} is not a weight-only quantized precision")
    if spec.library == "torchao":
        from accelbench.measure.generation.torchao_quant import quantize_with_torchao

        return quantize_with_torchao(model, precision, device, fused=fused)
    kernel = kernel_for(device, spec.weight_bits, fused=fused)
    if isinstance(kernel, str):
        raise NotImplementedError(kernel)
    before = tensor_bytes(model)
    untie_output(model)
    kept: dict[str, str] = {}
    smaller: dict[str, int] = {}
    padded: dict[str, int] = {}
    packed: list[nn.Module] = []
    for parent, attribute, name, weight, bias in list(linear_layers(model)):
        n, k = weight.shape
        replacement: nn.Module
        if isinstance(kernel, Int8Kernel):
            reason = kernel.unfit(n, k)
            if reason is None:
                replacement = Int8WeightOnlyLinear(weight, bias, kernel)
        else:
            asked = spec.group_size or INT4_GROUPS[-2]
            group = _group_for(k, asked)
            rows = kernel.padded_rows(n)
            reason = (f"{k} inputs split into none of the groups {INT4_GROUPS}" if group is None
                      else kernel.unfit(n + rows, k, group, weight.dtype))
            if reason is None:
                assert group is not None
                if group != asked:
                    smaller[name] = group
                if rows:
                    padded[name] = rows
                replacement = Int4WeightOnlyLinear(weight, bias, kernel, group, rows)
        if reason is not None:
            kept[name] = reason
            continue
        setattr(parent, attribute, replacement)
        packed.append(replacement)
    return Quantization(
        precision=precision, kernel=kernel.name, group_size=spec.group_size,
        quantized_layers=len(packed), kept=kept, smaller_groups=smaller, padded=padded,
        weight_bytes=tensor_bytes(model),
        packed_bytes=sum(tensor_bytes(layer) for layer in packed), unquantized_bytes=before)
