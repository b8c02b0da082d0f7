"""What the decoder language models (``nanogpt-char``, ``gpt2``, ``llama-1b``) share: token
sequences, next-token cross-entropy, AdamW as nanoGPT sets it up, and the generation contract
over the decoder's static key/value cache (``decoder.py``).

Data is synthetic: uniformly random token ids from a seeded generator, each sample ``seq_len + 1``
tokens split into inputs and next-token targets as nanoGPT's ``get_batch`` does. Random tokens
cost the model exactly the work real text does (every step computes every position); only the
loss's value differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.data.options import DataOptions
from accelbench.data.synthetic import synthetic_epoch
from accelbench.errors import UsageError
from accelbench.workloads.base import Batch, Workload
from accelbench.workloads.builtin import decoder
from accelbench.workloads.builtin.decoder import Decoder, DecoderConfig, KVCache, kv_cache_bytes
from accelbench.workloads.presets import Preset


@dataclass(frozen=True)
class DecoderPreset(Preset):
    model: DecoderConfig
    #: Tokens per training or evaluation sample.
    seq_len: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.seq_len <= self.model.context:
            raise UsageError(f"DecoderPreset seq_len {self.seq_len} must be 1 to the model's context "
                             f"({self.model.context})")


def token_batch_maker(vocab: int, seq_len: int) -> Callable[[torch.Generator, int], Batch]:
    """(inputs, targets): random token ids, the targets the inputs shifted by one."""

    def make(generator: torch.Generator, batch_size: int) -> Batch:
        tokens = torch.randint(0, vocab, (batch_size, seq_len + 1), generator=generator)
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    return make


class DecoderLM(Workload):
    """A :class:`Decoder` trained on next-token prediction. Subclasses set the presets and the
    optimiser's hyper-parameters."""

    preset: DecoderPreset
    lr: ClassVar[float] = 6e-4
    betas: ClassVar[tuple[float, float]] = (0.9, 0.95)
    eps: ClassVar[float] = 1e-8
    weight_decay: ClassVar[float] = 0.1
    #: Whether ``list``'s parameter count includes the learned position embeddings: nanoGPT's
    #: printed count leaves them out, Hugging Face's (GPT-2's published 124M) keeps them.
    count_position_embeddings: ClassVar[bool] = True

    def build_model(self) -> nn.Module:
        return Decoder(self.preset.model)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        # nanoGPT's configure_optimizers: weight decay on matrices and embeddings only, not on
        # biases and norm gains. (Its gradient clipping and accumulation are the training
        # script's, not the step's: a step here is one micro-batch, unclipped.)
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": self.weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=self.lr, betas=self.betas, eps=self.eps)

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        maker = token_batch_maker(self.preset.model.vocab, self.preset.seq_len)
        return synthetic_epoch(maker, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        ids, targets = batch
        return F.cross_entropy(model(ids).flatten(0, 1), targets.flatten())

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        ids, targets = batch
        return F.cross_entropy(model(ids).flatten(0, 1), targets.flatten(), reduction="sum")

    def tokens_per_sample(self, mode: str) -> int:
        return self.preset.seq_len

    def count_parameters(self, model: nn.Module) -> int:
        total = super().count_parameters(model)
        positions = getattr(model, "positions", None)
        if positions is not None and not self.count_position_embeddings:
            total -= positions.weight.numel()
        return total

    # --- the generation contract -----------------------------------------------------------
    def context_length(self) -> int:
        return self.preset.model.context

    def make_prompt(self, batch_size: int, prompt_len: int, seed: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        return torch.randint(0, self.preset.model.vocab, (batch_size, prompt_len), generator=generator)

    # Through the decoder's functions, which call the model: a compiled model runs its graphs
    # (model.prefill on a compiled module would be the original module's method, uncompiled).
    def prefill(self, model: nn.Module, prompt: torch.Tensor, max_len: int) -> tuple[torch.Tensor, KVCache]:
        cache = decoder.original(model).new_cache(max_len)
        return decoder.prefill(model, prompt, cache), cache

    def decode_step(self, model: nn.Module, tokens: torch.Tensor,
                    cache: object) -> tuple[torch.Tensor, KVCache]:
        assert isinstance(cache, KVCache)
        return decoder.decode(model, tokens, cache), cache

    def kv_cache_bytes(self, batch_size: int, max_len: int, dtype: torch.dtype) -> int:
        return kv_cache_bytes(self.preset.model, batch_size, max_len, dtype)

    kv_cache_kind: ClassVar[str] = "static"

    def keep_cache(self, model: nn.Module) -> None:
        decoder.original(model).keep_cache()

    def decoder_shape(self) -> dict[str, int]:
        """Layers, width, heads, key/value heads, MLP width and vocabulary: what a published
        budget is set for (MLPerf Inference's, for Llama-3.1-8B's shape)."""
        model = self.preset.model
        return {"layers": model.layers, "width": model.width, "heads": model.heads,
                "kv_heads": model.kv_heads, "ffn": model.ffn, "vocab": model.vocab}
