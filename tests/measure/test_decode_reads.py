"""What a decode step reads, at the dtype it really reads (issue 26, item 16): under amp-bf16 and
amp-fp16 the weights autocast casts are read as its low-precision copies, and the KV cache is
allocated in the dtype its keys come in; and a decode above the measured bandwidth on a device
that reports no cache size is not called a measurement error (issue 26, item 21)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from accelbench.devices import Device, DeviceSet
from accelbench.measure.generation import rounds as gen
from accelbench.measure.generation.decode_bytes import (
    CACHE_SIZE_UNKNOWN,
    MEASUREMENT_ERROR,
    cache_element_size,
    judge_bandwidth,
    weight_reads,
)
from accelbench.workloads import get_workload_class
from accelbench.workloads.builtin.decoder import Decoder
from accelbench.workloads.builtin.language_model import DecoderLM

#: Decoder steps are small: torch's two intra-op threads would wait on each other (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")


def cpu() -> Device:
    return DeviceSet.current().select("cpu")[0]


def tiny(name: str = "nanogpt-char") -> tuple[DecoderLM, Decoder]:
    workload = get_workload_class(name)("tiny")
    assert isinstance(workload, DecoderLM)
    torch.manual_seed(0)
    model = workload.build_model()
    assert isinstance(model, Decoder)
    return workload, model.eval()


def products_and_rest(model: Decoder) -> tuple[int, int]:
    """(elements of the parameters autocast casts: every Linear's, and the token table the tied
    head reads through ``linear``; elements of the norms' parameters, left in fp32)."""
    cast = sum(p.numel() for m in model.modules() if isinstance(m, nn.Linear) for p in m.parameters())
    cast += model.tokens.weight.numel()
    norms = sum(p.numel() for m in model.modules() if isinstance(m, (nn.LayerNorm, nn.RMSNorm))
                for p in m.parameters())
    return cast, norms


def amp_bf16(workload: DecoderLM, model: Decoder, **kwargs) -> gen.GenerationFigures:
    """As a generate case runs amp-bf16: one autocast context around the whole measurement."""
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        return gen.measure_generation(workload, model, cpu(), batch_size=2, prompt_len=6,
                                      new_tokens=4, rounds=1, warmup_rounds=0, **kwargs)


@pytest.mark.parametrize("name", ["nanogpt-char", "llama-1b"])
def test_amp_bf16_counts_autocast_copies_and_the_cache_in_bf16(name: str) -> None:
    """Item 16: amp-bf16 read 2x its bytes (every weight and the cache at fp32's 4 bytes): an
    H200 saw gpt2 at 483.0 MiB a token against bf16's 241.5, llama-1b's KV 12.0 against 6.0 MiB."""
    workload, model = tiny(name)
    figures = amp_bf16(workload, model)
    cast, norms = products_and_rest(model)
    # Eager, in one autocast context: each product reads autocast's cached bf16 copy.
    assert figures.weight_bytes_per_step == cast * 2 + norms * 4
    assert figures.weight_reads == {"bfloat16 autocast copy (cast cache)": cast * 2,
                                    "float32 as stored": norms * 4}
    # The cache is allocated at the first write, in the dtype the keys come out of autocast in.
    config = workload.preset.model
    per_position = 2 * config.layers * 2 * config.kv_heads * config.head_dim * 2  # B = 2, 2 bytes
    assert figures.kv_element_bytes == 2
    assert figures.kv_cache_bytes == per_position * (6 + 4)
    assert figures.cache_bytes_per_step == per_position * (6 + 4 / 2)
    assert "autocast" in figures.bytes_counted and "cast cache" in figures.bytes_counted
    again = gen.GenerationFigures.from_dict(figures.to_dict())
    assert again == figures
    # Without autocast, the same model reads its fp32 weights and cache (nothing changed there).
    with torch.no_grad():
        plain = gen.measure_generation(workload, model, cpu(), batch_size=2, prompt_len=6,
                                       new_tokens=4, rounds=1, warmup_rounds=0)
    assert plain.weight_bytes_per_step == (cast + norms) * 4
    assert plain.kv_cache_bytes == 2 * figures.kv_cache_bytes and plain.kv_element_bytes == 4


def test_weights_cast_every_step_count_the_read_the_copy_and_its_read() -> None:
    """Item 16: a compiled graph casts its parameter inputs on every call (autocast's cache is
    eager's), and autocast caches no parameter that does not require grad: there a step reads
    fp32 (4), writes bf16 (2) and reads it (2)."""
    workload, model = tiny()
    cast, norms = products_and_rest(model)
    compiled = amp_bf16(workload, model, casts_each_step=True)
    assert compiled.weight_bytes_per_step == cast * (4 + 2 + 2) + norms * 4
    assert compiled.weight_reads["float32 cast to bfloat16 every step (read, write, read)"] == cast * 8
    frozen = amp_bf16(workload, model.requires_grad_(False))
    assert frozen.weight_bytes_per_step == compiled.weight_bytes_per_step


def test_a_model_that_converts_its_own_weight_reads_it_every_step() -> None:
    class Converts(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(8, 8))
            self.scale = nn.Parameter(torch.ones(8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x @ self.weight.to(torch.bfloat16).float()) * self.scale

    model = Converts()
    with torch.no_grad():
        reads = weight_reads(lambda: model(torch.ones(1, 8)), model)
    assert reads.by_read == {"float32 as stored": 8 * 4,
                             "float32 cast to bfloat16 every step (read, write, read)": 64 * 8}


def test_the_cache_element_size_is_what_its_tensors_hold() -> None:
    class Layer:
        def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
            self.keys, self.values = keys, values

    class Cache:  # transformers' DynamicCache's shape: layers with keys and values
        def __init__(self) -> None:
            self.layers = [Layer(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4, dtype=torch.bfloat16))]
            self.position = torch.tensor([3])  # an index, not a cached key or value

    assert cache_element_size(Cache()) == 3.0  # fp32 keys (rotated in fp32), bf16 values
    assert cache_element_size([(torch.zeros(2, dtype=torch.float16),)]) == 2.0
    assert cache_element_size(object()) is None


def test_decode_above_the_bandwidth_on_a_device_without_a_cache_size_is_not_an_error() -> None:
    """Item 21: MPS reports no last-level cache size, so any decode above 100% was called a
    measurement error there, though a model that fits the Apple GPU's cache reads faster."""
    unknown = judge_bandwidth(120e9, 100e9, bytes_per_step=2**20, last_level_cache_bytes=None)
    assert (unknown.verdict, unknown.flagged) == (CACHE_SIZE_UNKNOWN, False)
    assert "no cache size" in unknown.verdict and "error" not in unknown.verdict
    known = judge_bandwidth(120e9, 100e9, bytes_per_step=2**30, last_level_cache_bytes=2**25)
    assert (known.verdict, known.flagged) == (MEASUREMENT_ERROR, True)


def test_on_the_ampere_personality_amp_counts_what_bf16_counts(personality) -> None:
    """Item 16 on the emulated CUDA GPU: torch.autocast("cuda") there, the casts seen below it."""
    workload, model = tiny("llama-1b")
    cast, norms = products_and_rest(model)
    with personality("ampere"):
        device = DeviceSet.current().select("cuda:0")[0]
        on_device = model.to(device.torch_device)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            amp = gen.measure_generation(workload, on_device, device, prompt_len=4, new_tokens=3,
                                         rounds=1, warmup_rounds=0)
        bf16 = gen.measure_generation(workload, on_device.to(torch.bfloat16), device, prompt_len=4,
                                      new_tokens=3, rounds=1, warmup_rounds=0)
    assert amp.weight_bytes_per_step == cast * 2 + norms * 4
    assert bf16.weight_bytes_per_step == (cast + norms) * 2
    assert amp.kv_cache_bytes == bf16.kv_cache_bytes and amp.kv_element_bytes == 2
