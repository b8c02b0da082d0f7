"""What every weight-only quantization shares (in-house, ``quantize.py``, and torchao's,
``torchao_quant.py``): the linear layers of a model (transformers' ``Conv1D`` included), the bytes
a model holds and the output layer untied before quantizing (what was done is the
``quantization.Quantization`` record)."""

from __future__ import annotations

from collections.abc import Iterator

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


def untie_output(model: nn.Module) -> None:
    """A model whose output layer reads its token table directly (the built-in decoders) gives it
    a module of its own first, so that it is quantized like every other linear layer."""
    untie = getattr(model, "untie_output", None)
    if callable(untie):
        untie()
