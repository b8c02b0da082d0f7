"""What weight-only quantization costs, beside its speed (``check --mode generate --precision
int8-wo|int4-wo``): the quantized model's greedy tokens against the same model's bf16 path and
against the CPU reference (fp64 by default).

- first difference: the first position (0 = the first new token) where the quantized model's
  greedy tokens leave each side's;
- top-1 agreement: teacher-forced, as quantization studies measure it: the quantized model reads
  the other side's tokens (not its own) and each position's argmax is compared with that side's
  token, so one early difference does not hide the agreement after it; the share of positions
  (all sequences) that agree;
- largest logit difference: over the same teacher-forced positions, max over the vocabulary of
  |quantized - other| relative to the other side's largest |logit| there (parity's scale-free
  measure, so random and trained models read alike).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from accelbench.measure.generation.rounds import GenerationWorkload
from accelbench.parity.generation import SCALE_FLOOR, greedy_with_logits
from accelbench.reference.expected_tokens import first_difference


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


def agreement(quantized_tokens: torch.Tensor, forced: torch.Tensor, tokens: torch.Tensor,
              logits: torch.Tensor) -> dict[str, Any]:
    """The three figures against one side: its greedy ``tokens`` (B, N) and ``logits`` (B, N,
    vocab), the quantized model's own greedy tokens and its ``forced`` logits on ``tokens``."""
    scale = logits.abs().amax(dim=-1).clamp_min(SCALE_FLOOR)
    relative = (forced - logits).abs().amax(dim=-1) / scale
    worst = int(relative.argmax())
    return {"first_difference": first_difference(quantized_tokens.tolist(), tokens.tolist()),
            "top1_agreement": float((forced.argmax(dim=-1) == tokens).double().mean()),
            "max_logit_diff": float(relative.flatten()[worst]),
            "max_logit_diff_position": worst % tokens.shape[1], "positions": int(tokens.numel())}


def quantization_quality(workload: GenerationWorkload, quantized: nn.Module, unquantized: nn.Module,
                         prompt: torch.Tensor, quantized_tokens: torch.Tensor,
                         reference_tokens: torch.Tensor, reference_logits: torch.Tensor,
                         reference: str) -> dict[str, Any]:
    """The ``quality`` section of a quantized precision's generation check: against the bf16 path
    (``unquantized``, the same weights before packing, on the same device) and the reference."""
    new_tokens = reference_tokens.shape[1]
    base_tokens, base_logits = greedy_with_logits(workload, unquantized, prompt, new_tokens)
    return {
        "against_bf16": agreement(quantized_tokens, forced_logits(workload, quantized, prompt, base_tokens),
                                  base_tokens, base_logits),
        "against_reference": agreement(quantized_tokens,
                                       forced_logits(workload, quantized, prompt, reference_tokens),
                                       reference_tokens, reference_logits),
        "reference": reference,
        "bf16_path_against_reference": first_difference(base_tokens.tolist(), reference_tokens.tolist()),
    }


def describe_quality(quality: dict[str, Any]) -> str:
    """One sentence: where the tokens leave each side, the agreement and the logit difference."""
    parts = []
    for key, name in (("against_bf16", "the bf16 path"), ("against_reference", quality.get("reference"))):
        side = quality.get(key) or {}
        first = side.get("first_difference")
        where = (f"follows {name}'s tokens throughout" if first is None
                 else f"leaves {name}'s tokens at position {first}")
        parts.append(f"{where}, top-1 agreement "
                     f"{side.get('top1_agreement', 0):.1%}, largest logit difference "
                     f"{side.get('max_logit_diff', 0):.2e}")
    return "quantized: " + "; ".join(parts)
