"""torchao's weight-only quantization (``int8-wo-torchao``, ``int4-wo-torchao``): the schemes of
accelbench's own ``int8-wo`` / ``int4-wo`` (measure/generation/quantize.py) through torchao's
``quantize_``, where torchao is installed (an optional extra; never required).

The configs are the ones torchao documents for those schemes (checked against torchao 0.18's
``quant_api.py`` and its tensor subclasses):

- int8: ``Int8WeightOnlyConfig()``: symmetric per output channel (``PerRow``), scale ``max|w| /
  127.5``; its eager product casts the whole int8 weight to the activation dtype every call
  (``mm(x, qdata.t().to(bf16)) * scale``), which decode_bytes counts as the cast it is;
- int4: ``Int4WeightOnlyConfig(group_size=128, int4_packing_format="tile_packed_to_4d",
  int4_choose_qparams_algorithm="tinygemm")``: asymmetric per group of 128 inputs in tinygemm's
  convention, packed for ``aten._weight_int4pack_mm`` (CUDA; torchao pads the inputs to 1024 and
  the outputs to 8). Where the device's int4 kernel is the CPU's (devices/quantized.py), torchao's
  CPU form of the same scheme: ``int4_packing_format="opaque"``, or from torchao 0.18 on
  ``torchao.prototype.quantization.int4.PrototypeInt4WeightOnlyConfig`` (``Int4OpaqueTensor``,
  ``aten._weight_int4pack_mm_for_cpu``). Both read the packed weight as stored.

Each linear layer goes through ``quantize_`` with torchao's default filter (``nn.Linear`` only):
transformers' ``Conv1D`` (GPT-2's layers), nn.MultiheadAttention's output projection, a layer
whose inputs do not split into the group and a layer torchao refuses (its words) stay in the
model's dtype, each named by its dotted module name in the report's ``kept``, with the reason.

torchao's ``quantize_`` sets inductor's global config to its recommendation
(``torchao.quantization.utils.recommended_inductor_config_setter``: ``coordinate_descent_tuning``,
``coordinate_descent_check_all_directions``, ``force_fuse_int_mm_with_mul``, ``fx_graph_cache``,
``triton.unique_kernel_names``; before 0.18 also ``torch.set_float32_matmul_precision("high")``).
Whatever it changed is put back as soon as ``quantize_`` returns, recorded in the report, and
applied again around the case's own run only (:func:`case_settings`): the next case in the same
process (a warm worker, ``--isolation none``) starts from the config it found.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import nn

from accelbench.devices import Device
from accelbench.devices.precisions import PrecisionSpec, precision_spec
from accelbench.devices.quantized import Int4Kernel, kernel_for
from accelbench.measure.generation.decode_bytes import FUSED_READ, stored_bytes
from accelbench.measure.generation.quantization import Quantization, settings_words
from accelbench.measure.generation.quantized_layers import (
    is_conv1d,
    linear_layers,
    tensor_bytes,
    untie_output,
)

#: The key under which a changed ``torch.get_float32_matmul_precision()`` is reported (put back,
#: never applied again: the precision table decides TF32).
MATMUL_PRECISION = "torch.float32_matmul_precision"


def torchao_api() -> Any:
    """torchao's quantization API, or NotImplementedError (the case's status: unsupported)."""
    try:
        from torchao import quantization
    except ImportError:
        raise NotImplementedError("torchao is not installed (an optional extra: pip install torchao); "
                                  "int8-wo and int4-wo use PyTorch's own kernels without it") from None
    return quantization


def torchao_version() -> str:
    import torchao

    return str(getattr(torchao, "__version__", "unknown"))


def _cpu_int4_config(group: int) -> tuple[Any, str]:
    """torchao's CPU form of tinygemm's int4 (``Int4OpaqueTensor``): a packing format of
    ``Int4WeightOnlyConfig`` until torchao 0.17, a prototype config of its own from 0.18."""
    from torchao.quantization.quantize_.workflows import Int4PackingFormat

    if "opaque" in {f.value for f in Int4PackingFormat}:
        words = f"group_size={group}, int4_packing_format='opaque', int4_choose_qparams_algorithm='tinygemm'"
        return (torchao_api().Int4WeightOnlyConfig(group_size=group, int4_packing_format="opaque",
                                                   int4_choose_qparams_algorithm="tinygemm"),
                f"Int4WeightOnlyConfig({words})")
    from torchao.prototype.quantization.int4 import (
        PrototypeInt4WeightOnlyConfig,
    )

    return (PrototypeInt4WeightOnlyConfig(group_size=group, int4_choose_qparams_algorithm="tinygemm"),
            f"PrototypeInt4WeightOnlyConfig(group_size={group}, int4_choose_qparams_algorithm='tinygemm')")


def torchao_config(spec: PrecisionSpec, device: Device) -> tuple[Any, str]:
    """(torchao's config for ``spec``'s scheme on ``device``, how it was built, in words)."""
    api = torchao_api()
    if spec.weight_bits == 8:
        return api.Int8WeightOnlyConfig(), "Int8WeightOnlyConfig() (int8 symmetric per output channel)"
    group = spec.group_size or 128
    kernel = kernel_for(device, 4)
    if isinstance(kernel, Int4Kernel) and kernel.cpu_layout:
        return _cpu_int4_config(group)
    words = (f"group_size={group}, int4_packing_format='tile_packed_to_4d', "
             "int4_choose_qparams_algorithm='tinygemm'")
    return (api.Int4WeightOnlyConfig(group_size=group, int4_packing_format="tile_packed_to_4d",
                                     int4_choose_qparams_algorithm="tinygemm"),
            f"Int4WeightOnlyConfig({words})")


# --- inductor's global config, as found --------------------------------------------------------
def _differs(before: Any, after: Any) -> bool:
    try:
        return bool(before != after)
    except Exception:  # a value without a truthful ==: identity decides
        return before is not after


@contextlib.contextmanager
def config_as_found() -> Iterator[dict[str, Any]]:
    """Inside, anything may change ``torch._inductor.config`` and the float32 matmul precision;
    on leaving, each changed setting is put back and the yielded dict holds what was set (name:
    value; the precision under MATMUL_PRECISION)."""
    import torch._inductor.config as inductor

    before, precision = inductor.get_config_copy(), torch.get_float32_matmul_precision()
    changed: dict[str, Any] = {}
    try:
        yield changed
    finally:
        after = inductor.get_config_copy()
        changed.update({k: v for k, v in after.items() if k in before and _differs(before[k], v)})
        inductor.load_config({k: before[k] for k in changed})
        if torch.get_float32_matmul_precision() != precision:
            changed[MATMUL_PRECISION] = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision(precision)


def case_settings(quantized: Quantization | None) -> AbstractContextManager[Any]:
    """The inductor settings torchao's ``quantize_`` asked for, around one case's run (its
    compile then sees them, as torchao intends), put back after it."""
    settings = {k: v for k, v in (quantized.applied_settings if quantized else {}).items()
                if k != MATMUL_PRECISION}
    if not settings:
        return contextlib.nullcontext()
    import torch._inductor.config as inductor

    return inductor.patch(settings)


# --- quantizing ---------------------------------------------------------------------------------
def torchao_unsupported(device: Device, precision: str) -> str | None:
    """Why torchao's ``quantize_`` cannot run ``precision`` on ``device``: not installed, or one
    small quantized product fails there (in torchao's or the device's words); None when it runs."""
    try:
        layer = nn.Linear(256, 64, bias=False, dtype=torch.bfloat16, device=device.torch_device)
        with config_as_found():  # importing torchao included
            torchao_api().quantize_(layer, torchao_config(precision_spec(precision), device)[0])
        if not _packed(layer.weight):
            raise NotImplementedError("torchao left a 64 x 256 bfloat16 layer unquantized")
        with torch.no_grad():
            layer(torch.ones(1, 256, dtype=torch.bfloat16, device=device.torch_device)).sum().item()
    except Exception as error:  # torchao's or the device's words are the reason
        version = _version_words()
        return f"{precision} on {device.name}{version}: {type(error).__name__}: {error}".splitlines()[0][:300]
    return None


def _version_words() -> str:
    try:
        return f" (torchao {torchao_version()})"
    except ImportError:
        return ""


def _packed(weight: torch.Tensor) -> bool:
    return type(weight) not in (torch.Tensor, nn.Parameter)


def _kept_reason(module: nn.Module, k: int, spec: PrecisionSpec) -> str:
    """Why torchao's ``quantize_`` left a layer as it was (it says nothing itself)."""
    if is_conv1d(module):
        return "transformers Conv1D: not an nn.Linear, the only layer torchao's default filter takes"
    if isinstance(module, nn.modules.linear.NonDynamicallyQuantizableLinear):
        return "nn.MultiheadAttention's output projection: torchao's default filter skips it"
    if spec.weight_bits == 4 and spec.group_size and k % spec.group_size:
        return f"{k} inputs do not split into torchao's groups of {spec.group_size}: torchao leaves it"
    return "left as it is by torchao"


def quantize_with_torchao(model: nn.Module, precision: str, device: Device,
                          fused: bool = False) -> Quantization:
    """torchao's ``quantize_`` (its default filter) over every linear layer of ``model``, one
    layer at a time so that a layer torchao refuses is kept with torchao's words instead of
    failing the case; inductor's config as it was found afterwards. ``fused``: the model will be
    compiled by inductor, which fuses int8's cast into the product where it fuses gpt-fast's
    (devices/quantized.FUSED_INT8): the weight is then read once, as stored (decode_bytes)."""
    spec = precision_spec(precision)
    before = tensor_bytes(model)
    untie_output(model)
    kept: dict[str, str] = {}
    packed: list[torch.Tensor] = []
    fuses = spec.weight_bits == 8 and fused and getattr(kernel_for(device, 8, fused=True), "fused", False)
    with config_as_found() as changed:  # importing torchao included
        config, words = torchao_config(spec, device)
        api = torchao_api()
        for parent, attribute, name, weight, _ in list(linear_layers(model)):
            module = getattr(parent, attribute)
            try:
                api.quantize_(module, config)
            except Exception as error:  # torchao's words are the reason
                kept[name] = f"torchao: {type(error).__name__}: {error}".splitlines()[0][:200]
                continue
            if not _packed(module.weight):
                kept[name] = _kept_reason(module, weight.shape[1], spec)
                continue
            if fuses:
                setattr(module.weight, FUSED_READ, True)
            packed.append(module.weight)
    return Quantization(
        precision=precision, kernel=f"torchao {torchao_version()} quantize_ ({words})",
        group_size=spec.group_size, quantized_layers=len(packed), kept=kept,
        weight_bytes=tensor_bytes(model), packed_bytes=sum(stored_bytes(w) for w in packed),
        unquantized_bytes=before, library="torchao", library_version=torchao_version(),
        config=words, inductor_settings=settings_words(changed), applied_settings=dict(changed))
