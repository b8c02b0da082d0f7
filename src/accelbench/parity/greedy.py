"""One side of a generation check: greedy decoding that keeps every step's logits, and the
floor under the scale logits are compared on (``parity/generation.py`` judges the two sides;
``parity/quantized.py`` measures what quantization costs with the same decoding)."""

from __future__ import annotations

import torch
from torch import nn

from accelbench.measure.generation.rounds import GenerationWorkload

#: Logits are compared relative to the largest |reference logit| at the position; below this the
#: position's scale is taken as this (an all-zero row would divide by zero).
SCALE_FLOOR = 1e-12


@torch.no_grad()
def greedy_with_logits(workload: GenerationWorkload, model: nn.Module, prompt: torch.Tensor,
                       new_tokens: int, decode_model: nn.Module | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy tokens (B, N) and every step's logits (B, N, vocab), both on the CPU (logits in
    float64). ``decode_model``: what the decode steps run where it is not ``model`` (the
    execution recipe's compiled decode step)."""
    decoder = model if decode_model is None else decode_model
    logits, cache = workload.prefill(model, prompt, prompt.shape[1] + new_tokens)
    steps = [logits]
    token = logits.argmax(dim=-1)
    tokens = [token]
    for _ in range(new_tokens - 1):
        logits, cache = workload.decode_step(decoder, token, cache)
        token = logits.argmax(dim=-1)
        steps.append(logits)
        tokens.append(token)
    return torch.stack(tokens, dim=1).cpu(), torch.stack(steps, dim=1).cpu().double()
