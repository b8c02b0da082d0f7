"""A Llama-3.2-1B-shaped decoder in plain torch.nn (after gpt-fast's ``model.py``): RMSNorm,
SwiGLU, rotary positions with Llama 3's frequency scaling, grouped-query attention, tied
embeddings; random weights, trained at batch 8 x 1024 tokens."""

from __future__ import annotations

from accelbench.workloads.base import register
from accelbench.workloads.builtin.decoder import DecoderConfig, RopeScaling
from accelbench.workloads.builtin.gpt2 import OPENWEBTEXT_SAMPLES
from accelbench.workloads.builtin.language_model import DecoderLM, DecoderPreset

#: meta-llama/Llama-3.2-1B's config.json: rope_theta 500000, rope_scaling of type llama3.
LLAMA3_SCALING = RopeScaling(factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                             original_context=8192)


@register
class Llama1B(DecoderLM):
    name = "llama-1b"
    description = ("Llama-3.2-1B's shape: 16 layers, 2048 wide, 32 query / 8 key-value heads, SwiGLU "
                   "8192, RMSNorm, rotary positions (theta 500000, Llama 3 scaling), vocabulary 128256, "
                   "tied embeddings: 1.24B parameters; batch 8 x 1024 tokens, AdamW lr 3e-4, betas "
                   "0.9/0.95, eps 1e-5, weight decay 0.1 (Llama 2's); synthetic tokens")
    source = "https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json"
    input_shape = (1024,)
    presets = {
        "published": DecoderPreset(
            batch_size={"train": 8, "eval": 8}, dataset_size=OPENWEBTEXT_SAMPLES, seq_len=1024,
            model=DecoderConfig(vocab=128_256, context=131_072, layers=16, width=2048, heads=32,
                                kv_heads=8, ffn=8192, layout="llama", rope_theta=500_000.0,
                                rope_scaling=LLAMA3_SCALING, init="parallel")),
        "tiny": DecoderPreset(
            batch_size={"train": 4, "eval": 4}, dataset_size={"train": 8, "eval": 8}, seq_len=32,
            model=DecoderConfig(vocab=512, context=128, layers=2, width=64, heads=4, kv_heads=2,
                                ffn=192, layout="llama", rope_theta=500_000.0,
                                rope_scaling=LLAMA3_SCALING)),
    }
    lr = 3e-4
    eps = 1e-5
    #: 2: the published size's weights drawn in parallel, each once (DecoderConfig.init), not one
    #: after another after every module's default init (11 s of one core in each case's set-up,
    #: benchmarks/case_setup.py); the same distributions, other values. The tiny size's are
    #: version 1's, drawn as before (its shipped reference tokens hold).
    version = 2
