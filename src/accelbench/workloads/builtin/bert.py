"""BERT-style sentence classification on SST-2-shaped synthetic data.

``bert-base`` is HuggingFace's ``BertForSequenceClassification(BertConfig())`` as in Apple's launch
benchmark (batch 64); it needs the optional ``transformers`` package, imported only when the
workload runs. ``transformer-small`` is a BERT-Tiny-shaped encoder (Turc et al. 2019: 2 layers,
hidden 128, 2 heads, FFN 512) written with ``torch.nn.TransformerEncoder``: it needs nothing
optional and a training step takes well under a second on a 2-core CPU, so it is the quick
suite's transformer. (Measured on a busy 2-core CPU at batch 64 x 128 tokens: a BERT-base
training step takes minutes, a 4-layer BERT-Mini shape about 3-6 s.)

Both read sequences of 128 tokens (``[CLS]`` ... ``[SEP]``, no padding, so every step does the
same work) with binary labels; an epoch is SST-2's 67,349 training / 872 validation sentences.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.data.options import DataOptions
from accelbench.data.synthetic import synthetic_epoch
from accelbench.workloads.base import Batch, Workload, register
from accelbench.workloads.presets import Preset

SST2_SIZES = {"train": 67_349, "eval": 872}
BERT_VOCAB = 30_522
CLS, SEP = 101, 102
INSTALL_HINT = "pip install 'accelbench[transformers]'"


@dataclass(frozen=True)
class TextPreset(Preset):
    """Sentences (vocabulary, tokens per sentence) and the encoder that reads them."""

    vocab: int
    seq_len: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    #: Position embeddings (the longest sequence the encoder accepts).
    max_len: int


def text_presets(published_encoder: dict[str, int]) -> dict[str, TextPreset]:
    """SST-2-shaped sentences at both sizes (the tiny one with a 1,000-token vocabulary and 16
    tokens), read by ``published_encoder`` at the published size and by a 2-layer, 64-wide
    encoder at the tiny one."""
    return {
        "published": TextPreset(batch_size={"train": 64, "eval": 64}, dataset_size=SST2_SIZES,
                                vocab=BERT_VOCAB, seq_len=128, **published_encoder),
        "tiny": TextPreset(batch_size={"train": 4, "eval": 4}, dataset_size={"train": 8, "eval": 8},
                           vocab=1000, seq_len=16, hidden=64, layers=2, heads=2, ffn=128, max_len=64),
    }


def sentence_batch_maker(vocab_size: int, seq_len: int) -> Callable[[torch.Generator, int], Batch]:
    """(token ids, attention mask, labels) shaped like tokenised SST-2 sentences."""

    def make(generator: torch.Generator, batch_size: int) -> Batch:
        ids = torch.randint(SEP + 1, vocab_size, (batch_size, seq_len), generator=generator)
        ids[:, 0], ids[:, -1] = CLS, SEP
        mask = torch.ones(batch_size, seq_len, dtype=torch.long)
        labels = torch.randint(0, 2, (batch_size,), generator=generator)
        return ids, mask, labels
    return make


class SentenceClassifier(Workload):
    """Shared data and optimiser; subclasses say how the model is built and called."""

    input_shape = (128,)
    preset: TextPreset

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        maker = sentence_batch_maker(self.preset.vocab, self.preset.seq_len)
        return synthetic_epoch(maker, self.samples_per_epoch(mode), batch_size, options.seed)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=2e-5)

    def logits(self, model: nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return model(ids, mask)

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        ids, mask, labels = batch
        return F.cross_entropy(self.logits(model, ids, mask), labels)

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        ids, mask, labels = batch
        return F.cross_entropy(self.logits(model, ids, mask), labels, reduction="sum")


def transformers_missing() -> str | None:
    try:
        import transformers  # noqa: F401
    except ImportError as error:
        return (f"needs the optional 'transformers' package ({error}); install it with: "
                f"{INSTALL_HINT}")
    return None


@register
class BertBase(SentenceClassifier):
    name = "bert-base"
    description = ("HuggingFace BertForSequenceClassification(BertConfig()): BERT-base, 110M params, "
                   "seq 128, 2 labels, AdamW lr 2e-5")
    source = "https://huggingface.co/docs/transformers/model_doc/bert"
    # BertConfig()'s defaults: BERT-base.
    presets = text_presets(dict(hidden=768, layers=12, heads=12, ffn=3072, max_len=512))

    def unavailable_reason(self) -> str | None:
        return transformers_missing()

    def config(self) -> Any:
        from transformers import BertConfig

        p = self.preset
        # Two labels, as the data's: a config's default (transformers 5 declares no num_labels).
        return BertConfig(vocab_size=p.vocab, hidden_size=p.hidden, num_hidden_layers=p.layers,
                          num_attention_heads=p.heads, intermediate_size=p.ffn,
                          max_position_embeddings=p.max_len)

    def build_model(self) -> nn.Module:
        reason = transformers_missing()
        if reason:
            raise NotImplementedError(reason)
        from transformers import BertForSequenceClassification

        return BertForSequenceClassification(self.config())

    def logits(self, model: nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # transformers reads the mask's values to drop an all-ones mask, which meta tensors (used to
        # count FLOPs) cannot give; passing none there counts exactly what the real step computes.
        return model(input_ids=ids, attention_mask=None if mask.is_meta else mask).logits


class SmallTextEncoder(nn.Module):
    """BERT's layout (token + position embeddings, post-LN GELU encoder, tanh pooler) in plain torch."""

    def __init__(self, vocab_size: int = BERT_VOCAB, hidden: int = 128, layers: int = 2, heads: int = 2,
                 ffn: int = 512, max_len: int = 512, num_labels: int = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, hidden)
        self.positions = nn.Embedding(max_len, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout, activation="gelu",
                                           batch_first=True, layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.dropout(self.norm(self.tokens(ids) + self.positions(positions)))
        x = self.encoder(x, src_key_padding_mask=mask == 0)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return self.classifier(self.dropout(pooled))


@register
class TransformerSmall(SentenceClassifier):
    name = "transformer-small"
    description = ("BERT-Tiny-shaped classifier in plain torch.nn (2 layers, hidden 128, 2 heads, "
                   "4.4M params) at BERT-base's batch 64 x seq 128; the quick suite's transformer")
    source = "https://arxiv.org/abs/1908.08962 (BERT-Tiny shape); torch.nn.TransformerEncoder"
    presets = text_presets(dict(hidden=128, layers=2, heads=2, ffn=512, max_len=512))

    def build_model(self) -> nn.Module:
        p = self.preset
        return SmallTextEncoder(p.vocab, hidden=p.hidden, layers=p.layers, heads=p.heads, ffn=p.ffn,
                                max_len=p.max_len)

