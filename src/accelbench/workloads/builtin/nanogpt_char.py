"""nanoGPT's Shakespeare character model (``config/train_shakespeare_char.py``): the smallest
decoder, and the quick suite's language model."""

from __future__ import annotations

from accelbench.workloads.base import register
from accelbench.workloads.builtin.decoder import DecoderConfig
from accelbench.workloads.builtin.language_model import DecoderLM, DecoderPreset

#: nanoGPT's data/shakespeare_char/prepare.py: 1,003,854 training and 111,540 validation
#: characters, in samples of 256.
SHAKESPEARE_SAMPLES = {"train": 1_003_854 // 256, "eval": 111_540 // 256}


@register
class NanoGPTChar(DecoderLM):
    name = "nanogpt-char"
    description = ("nanoGPT's Shakespeare character model: 6 layers, 6 heads, 384 wide, context 256, "
                   "65 characters, no biases, dropout 0.2, 10.65M parameters (as nanoGPT counts them, "
                   "without the 98K position embeddings); AdamW lr 1e-3, betas 0.9/0.99, weight decay "
                   "0.1; synthetic characters (the text is not shipped)")
    source = "https://github.com/karpathy/nanoGPT/blob/master/config/train_shakespeare_char.py"
    input_shape = (256,)
    presets = {
        "published": DecoderPreset(
            batch_size={"train": 64, "eval": 64}, dataset_size=SHAKESPEARE_SAMPLES, seq_len=256,
            model=DecoderConfig(vocab=65, context=256, layers=6, width=384, heads=6, kv_heads=6,
                                ffn=4 * 384, dropout=0.2)),
        "tiny": DecoderPreset(
            batch_size={"train": 4, "eval": 4}, dataset_size={"train": 8, "eval": 8}, seq_len=32,
            model=DecoderConfig(vocab=65, context=32, layers=2, width=32, heads=4, kv_heads=4,
                                ffn=4 * 32, dropout=0.2)),
    }
    lr = 1e-3
    betas = (0.9, 0.99)
    count_position_embeddings = False
