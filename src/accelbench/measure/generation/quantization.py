"""What weight-only quantization did to a model (``quantize.py``, ``torchao_quant.py``): the
``quantization`` section of a generation result. Without torch, so the result records
(results/generation.py) hold it as the file keeps it, as they hold the execution record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelbench.codec import Codec


def settings_words(settings: dict[str, Any]) -> dict[str, Any]:
    """Inductor settings as the file keeps them: a value that is not plain data by its repr."""
    return {k: v if isinstance(v, bool | int | float | str) else repr(v) for k, v in settings.items()}


#: torchao's keys: written where torchao quantized (``omit_none``), absent for the in-house kernels.
_TORCHAO = {"omit_none": True}


@dataclass(frozen=True)
class Quantization(Codec):
    """What quantization did to a model: the ``quantization`` section of a generation result."""

    precision: str
    kernel: str = ""
    group_size: int | None = None
    #: Linear layers quantized, and those kept in the model's dtype with the reason.
    quantized_layers: int = 0
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
    #: torchao only: its version, the config it was given (words), and the inductor settings its
    #: quantize_ set, in words (``settings_words``) ...
    library_version: str | None = field(default=None, metadata=_TORCHAO)
    config: str | None = field(default=None, metadata=_TORCHAO)
    inductor_settings: dict[str, Any] | None = field(default=None, metadata=_TORCHAO)
    #: ... and as set, put back after quantize_ and applied around the case's run only
    #: (torchao_quant.case_settings): not stored, so a record read back has none to apply.
    applied_settings: dict[str, Any] = field(default_factory=dict, compare=False, repr=False,
                                             metadata={"stored": False})
