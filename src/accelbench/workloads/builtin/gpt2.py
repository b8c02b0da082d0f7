"""GPT-2 small in plain torch.nn, trained as nanoGPT's ``config/train_gpt2.py`` does (batch 12 x
1024 tokens, AdamW lr 6e-4, betas 0.9/0.95, weight decay 0.1)."""

from __future__ import annotations

from accelbench.workloads.base import register
from accelbench.workloads.builtin.decoder import DecoderConfig
from accelbench.workloads.builtin.language_model import DecoderLM, DecoderPreset

#: nanoGPT's data/openwebtext/prepare.py: 9,035,582,198 training and 4,434,897 validation tokens
#: (GPT-2's tokenizer), in samples of 1024: the epoch gpt2 and llama-1b stand in for.
OPENWEBTEXT_SAMPLES = {"train": 9_035_582_198 // 1024, "eval": 4_434_897 // 1024}


@register
class GPT2(DecoderLM):
    name = "gpt2"
    description = ("GPT-2 small: 12 layers, 12 heads, 768 wide, context 1024, vocabulary 50257, biases, "
                   "tied embeddings, learned positions: 124.4M parameters (position embeddings "
                   "counted, as Hugging Face does); nanoGPT's batch 12 x 1024 tokens, AdamW lr 6e-4, "
                   "betas 0.9/0.95, weight decay 0.1; synthetic tokens")
    source = "https://github.com/karpathy/nanoGPT/blob/master/config/train_gpt2.py"
    input_shape = (1024,)
    presets = {
        "published": DecoderPreset(
            batch_size={"train": 12, "eval": 12}, dataset_size=OPENWEBTEXT_SAMPLES, seq_len=1024,
            model=DecoderConfig(vocab=50257, context=1024, layers=12, width=768, heads=12, kv_heads=12,
                                ffn=4 * 768, bias=True)),
        "tiny": DecoderPreset(
            batch_size={"train": 4, "eval": 4}, dataset_size={"train": 8, "eval": 8}, seq_len=32,
            model=DecoderConfig(vocab=512, context=64, layers=2, width=64, heads=4, kv_heads=4,
                                ffn=4 * 64, bias=True)),
    }
