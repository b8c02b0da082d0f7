"""What weight-only quantization costs, beside its speed (``check --mode generate --precision
int8-wo|int4-wo``): the quantized model's greedy tokens against the same model's bf16 path and
against the CPU reference (fp64 by default), and its kernel against the product it stands for.

Models accelbench builds have random weights (the built-in decoders from a seed, ``hf:`` models
from their config alone), so these figures check the kernel and the scheme's rounding on this
model's shapes; they are not the model quality a trained checkpoint would show (``weights`` says
"random", and the words say so). An ``hf:FOLDER`` holding a saved checkpoint is built with its
weights: ``weights`` then names the folder, and the figures are that model's (on random prompt
tokens).

- first difference: the first position (0 = the first new token) where the quantized model's
  greedy tokens leave each side's;
- top-1 agreement: teacher-forced, as quantization studies measure it: the quantized model reads
  the other side's tokens (not its own) and each position's argmax is compared with that side's
  token, so one early difference does not hide the agreement after it; the share of positions
  (all sequences) that agree;
- largest logit difference: over the same teacher-forced positions, max over the vocabulary of
  |quantized - other| relative to the other side's largest |logit| there (parity's scale-free
  measure, so random and trained models read alike);
- mean KL divergence: over the same positions, KL(other || quantized) of the next-token
  distributions (softmax of the logits), in nats, as llama.cpp's perplexity tool and
  quantization studies report it beside top-1 agreement (agreement counts only the argmax; KL
  weighs how far the whole distribution moved).

The kernel check runs each packed layer's product on the device, for one row (a decode step's
product) and for 16 (a prefill's), against the float32 product of the same bf16 inputs with the
weight the layer stores, dequantised (int8: ``q * scale``; int4: ``(q - 8) * scale + zero``, from
the layer's own scales and zero points; torchao's tensors dequantise themselves). Both sides read
the same weights, so only the kernel's own rounding may separate them: its bf16 output (2^-9 of
each value), its bf16 dequantised weight (2^-9 of each, random in sign, so it grows with the
product), the fused int8 form's second bf16 rounding after the scale: a few 2^-9 of the largest
output. ``KERNEL_TOLERANCE`` (2^-5, 16 such roundings) leaves room for any accumulation order; a
wrong kernel (weights packed for another layout, another group, a dropped zero point) errs by the
size of the weights themselves, tens of percent.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from accelbench.measure.generation.quantize import dequantized_int4, int4_weights
from accelbench.measure.generation.quantized_layers import linear_layers
from accelbench.measure.generation.rounds import GenerationWorkload
from accelbench.parity.greedy import SCALE_FLOOR, greedy_with_logits
from accelbench.reference.expected_tokens import first_difference
from accelbench.workloads.base import RANDOM_WEIGHTS

#: The kernel's product may leave the dequantised weights' product by this much, relative to the
#: product's largest |value| (2^-5: 16 bf16 roundings; the module's docstring says why).
KERNEL_TOLERANCE = 2.0**-5
#: Rows of the kernel check's inputs: a decode step's product (batch 1) and a prefill's.
KERNEL_ROWS = (1, 16)


@torch.no_grad()
def forced_logits(workload: GenerationWorkload, model: nn.Module, prompt: torch.Tensor,
                  tokens: torch.Tensor) -> torch.Tensor:
    """Every step's logits (B, N, vocab, float64 on the CPU) when ``model`` is fed ``tokens``
    (B, N) after ``prompt`` instead of its own argmax: step i's logits predict token i."""
    new_tokens = tokens.shape[1]
    logits, cache = workload.prefill(model, prompt, prompt.shape[1] + new_tokens)
    steps = [logits]
    fed = tokens.to(prompt.device)
    for i in range(new_tokens - 1):
        logits, cache = workload.decode_step(model, fed[:, i], cache)
        steps.append(logits)
    return torch.stack(steps, dim=1).cpu().double()


def mean_kl(forced: torch.Tensor, logits: torch.Tensor) -> float:
    """Mean over positions of KL(P || Q) in nats, P the other side's next-token distribution
    (``logits``), Q the quantized model's (``forced``): both (B, N, vocab)."""
    p_log = torch.log_softmax(logits.double(), dim=-1)
    q_log = torch.log_softmax(forced.double(), dim=-1)
    return float((p_log.exp() * (p_log - q_log)).sum(dim=-1).mean())


def agreement(quantized_tokens: torch.Tensor, forced: torch.Tensor, tokens: torch.Tensor,
              logits: torch.Tensor) -> dict[str, Any]:
    """The figures against one side: its greedy ``tokens`` (B, N) and ``logits`` (B, N, vocab),
    the quantized model's own greedy tokens and its ``forced`` logits on ``tokens``."""
    scale = logits.abs().amax(dim=-1).clamp_min(SCALE_FLOOR)
    relative = (forced - logits).abs().amax(dim=-1) / scale
    worst = int(relative.argmax())
    return {"first_difference": first_difference(quantized_tokens.tolist(), tokens.tolist()),
            "top1_agreement": float((forced.argmax(dim=-1) == tokens).double().mean()),
            "mean_kl": mean_kl(forced, logits),
            "max_logit_diff": float(relative.flatten()[worst]),
            "max_logit_diff_position": worst % tokens.shape[1], "positions": int(tokens.numel())}


def _dequantised(module: nn.Module, original: torch.Tensor | None) -> torch.Tensor | None:
    """The float32 weight [n, k] a packed layer stands for, from what it stores; None for a
    layer that is not packed."""
    scales = getattr(module, "scales", None)
    weight = getattr(module, "weight", None)
    if isinstance(scales, torch.Tensor) and isinstance(weight, torch.Tensor) and weight.dtype == torch.int8:
        return weight.float() * scales.float()[:, None]
    packed, group = getattr(module, "scales_and_zeros", None), getattr(module, "group", None)
    if isinstance(packed, torch.Tensor) and isinstance(group, int) and original is not None:
        # The packed values are in the kernel's own layout: the 4-bit values are the original
        # weight's, quantized as quantize.py does; the scales and zero points are the layer's.
        n = original.shape[0]
        values, _ = int4_weights(original, group, packed.dtype)
        return dequantized_int4(values, packed[:, :n], group)
    dequantize = getattr(weight, "dequantize", None)
    # torchao's packed tensor subclasses (not any subclass: an emulated device's tensors are one)
    if type(weight).__module__.startswith("torchao") and callable(dequantize):
        return dequantize().float()
    return None


@torch.no_grad()
def kernel_check(quantized: nn.Module, unquantized: nn.Module, seed: int = 0) -> dict[str, Any]:
    """Each packed layer of ``quantized`` against the float32 product of its dequantised weight,
    on the layer's own device, for ``KERNEL_ROWS`` rows of seeded bf16 inputs: the largest
    relative difference, where, and whether it is within ``KERNEL_TOLERANCE``."""
    plain = copy.deepcopy(unquantized)
    untie = getattr(plain, "untie_output", None)
    if callable(untie):  # as quantize_weights does: the output layer then has a name of its own
        untie()
    originals = {name: weight for _, _, name, weight, _ in linear_layers(plain)}
    generator = torch.Generator().manual_seed(seed)
    worst, worst_layer, checked = 0.0, "", 0
    for name, module in quantized.named_modules():
        weight = _dequantised(module, originals.get(name))
        if weight is None:
            continue
        checked += 1
        bias = getattr(module, "bias", None)
        for rows in KERNEL_ROWS:
            x = torch.randn(rows, weight.shape[1], generator=generator).to(weight.device, torch.bfloat16)
            expected = x.float() @ weight.T + (bias.float() if bias is not None else 0.0)
            got = module(x).float()
            difference = float((got - expected).abs().amax() / expected.abs().amax().clamp_min(SCALE_FLOOR))
            if difference > worst or not worst_layer:
                worst, worst_layer = difference, name
    return {"layers": checked, "rows": list(KERNEL_ROWS), "max_rel_diff": worst, "worst_layer": worst_layer,
            "tolerance": KERNEL_TOLERANCE,
            "verdict": "matches" if worst <= KERNEL_TOLERANCE else "differs"}


def quantization_quality(workload: GenerationWorkload, quantized: nn.Module, unquantized: nn.Module,
                         prompt: torch.Tensor, quantized_tokens: torch.Tensor,
                         reference_tokens: torch.Tensor, reference_logits: torch.Tensor,
                         reference: str) -> dict[str, Any]:
    """The ``quality`` section of a quantized precision's generation check: against the bf16 path
    (``unquantized``, the same weights before packing, on the same device) and the reference, and
    the kernel against its dequantised weights (``kernel_check``)."""
    new_tokens = reference_tokens.shape[1]
    base_tokens, base_logits = greedy_with_logits(workload, unquantized, prompt, new_tokens)
    return {
        # Random (every built-in, a config) or the checkpoint an hf: folder holds.
        "weights": str(getattr(workload, "weights_source", RANDOM_WEIGHTS)),
        "kernel": kernel_check(quantized, unquantized),
        "against_bf16": agreement(quantized_tokens, forced_logits(workload, quantized, prompt, base_tokens),
                                  base_tokens, base_logits),
        "against_reference": agreement(quantized_tokens,
                                       forced_logits(workload, quantized, prompt, reference_tokens),
                                       reference_tokens, reference_logits),
        "reference": reference,
        "bf16_path_against_reference": first_difference(base_tokens.tolist(), reference_tokens.tolist()),
    }


def describe_kernel(kernel: dict[str, Any] | None) -> str:
    if not kernel:
        return ""
    if not kernel.get("layers"):
        return "no packed layer to check the kernel on"
    relation = "within" if kernel.get("verdict") == "matches" else "BEYOND"
    return (f"the kernel's product {relation} {kernel.get('tolerance', 0):.2g} of the dequantised "
            f"weights' ({kernel.get('layers')} layers, largest difference "
            f"{kernel.get('max_rel_diff', 0):.2e} in {kernel.get('worst_layer')})")


def describe_quality(quality: dict[str, Any]) -> str:
    """What the figures were measured on, the kernel check, then per side: where the tokens
    leave it, the agreement, the KL divergence and the logit difference."""
    weights = quality.get("weights", RANDOM_WEIGHTS)
    parts = ["measured on random weights (a kernel check, not model quality)" if weights == RANDOM_WEIGHTS
             else f"measured on the checkpoint's weights ({weights}): the model's quality on random "
             "prompt tokens"]
    kernel = describe_kernel(quality.get("kernel"))
    if kernel:
        parts.append(kernel)
    for key, name in (("against_bf16", "the bf16 path"), ("against_reference", quality.get("reference"))):
        side = quality.get(key) or {}
        first = side.get("first_difference")
        where = (f"follows {name}'s tokens throughout" if first is None
                 else f"leaves {name}'s tokens at position {first}")
        kl = side.get("mean_kl")
        parts.append(f"{where}, top-1 agreement {side.get('top1_agreement', 0):.1%}"
                     + (f", mean KL divergence {kl:.2e} nats" if kl is not None else "")
                     + f", largest logit difference {side.get('max_logit_diff', 0):.2e}")
    return "quantized: " + "; ".join(parts)
