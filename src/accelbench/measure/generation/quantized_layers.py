"""What every weight-only quantization shares (in-house, ``quantize.py``, and torchao's,
``torchao_quant.py``): the linear layers of a model (transformers' ``Conv1D`` included), the bytes
a model holds, the output layer untied before quantizing, and the ``quantization`` section that
says what was done."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from accelbench.measure.generation.decode_bytes import stored_bytes


def is_conv1d(module: nn.Module) -> bool:
    """transformers' ``Conv1D`` (GPT-2): ``x @ weight + bias``, weight stored (in, out)."""
    return type(module).__name__ == "Conv1D" and hasattr(module, "nf")


Layer = tuple[nn.Module, str, str, torch.Tensor, torch.Tensor | None]


def linear_layers(model: nn.Module) -> Iterator[Layer]:
    """(parent, attribute, dotted name, weight as [out, in], bias) of every linear layer."""
    for parent_name, parent in list(model.named_modules()):
        for attribute, child in list(parent.named_children()):
            name = f"{parent_name}.{attribute}" if parent_name else attribute
            if isinstance(child, nn.Linear):
                yield parent, attribute, name, child.weight.detach(), child.bias
            elif is_conv1d(child):
                yield parent, attribute, name, child.weight.detach().t(), child.bias


def tensor_bytes(model: nn.Module) -> int:
    """Bytes of every parameter and buffer ``model`` holds, each storage once (a packed tensor
    subclass, torchao's, by its inner tensors)."""
    seen: dict[int, int] = {}
    for tensor in (*model.parameters(), *model.buffers()):
        if type(tensor) not in (torch.Tensor, nn.Parameter):
            seen[id(tensor)] = stored_bytes(tensor)
            continue
        storage = tensor.untyped_storage()
        seen[storage.data_ptr() or id(tensor)] = storage.nbytes()
    return sum(seen.values())


@dataclass(frozen=True)
class QuantizedLayers:
    """What quantization did to a model: the ``quantization`` section of a generation result."""

    precision: str
    kernel: str
    group_size: int | None
    #: Linear layers quantized, and those kept in the model's dtype with the reason.
    quantized: int
    kept: dict[str, str] = field(default_factory=dict)
    #: Layers whose group is smaller than ``group_size`` (too few inputs), and the group used.
    smaller_groups: dict[str, int] = field(default_factory=dict)
    #: int4 layers whose outputs were padded with zero rows to the kernel's multiple: rows added.
    padded: dict[str, int] = field(default_factory=dict)
    #: The quantized model's parameters and buffers, measured (each storage once) ...
    weight_bytes: int = 0
    #: ... and the packed layers' weights, scales and zero points alone.
    packed_bytes: int = 0
    #: The model's bytes before quantization (at the activation dtype), for the ratio.
    unquantized_bytes: int = 0
    library: str = "torch"
    #: torchao's version, the config it was given (words), and the inductor settings its
    #: quantize_ set (put back after it, applied around the case's run only): torchao only.
    library_version: str = ""
    config: str = ""
    inductor_settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "kernel": self.kernel, "group_size": self.group_size,
                "quantized_layers": self.quantized, "kept": dict(self.kept),
                "smaller_groups": dict(self.smaller_groups), "padded": dict(self.padded),
                "weight_bytes": self.weight_bytes,
                "packed_bytes": self.packed_bytes, "unquantized_bytes": self.unquantized_bytes,
                "library": self.library,
                **({"library_version": self.library_version, "config": self.config,
                    "inductor_settings": {k: v if isinstance(v, (bool, int, float, str)) else repr(v)
                                          for k, v in self.inductor_settings.items()}}
                   if self.library == "torchao" else {})}


def untie_output(model: nn.Module) -> None:
    """A model whose output layer reads its token table directly (the built-in decoders) gives it
    a module of its own first, so that it is quantized like every other linear layer."""
    untie = getattr(model, "untie_output", None)
    if callable(untie):
        untie()
