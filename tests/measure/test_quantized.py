"""Issue 28 item 3: weight-only quantized decode (``--precision int8-wo,int4-wo``) through PyTorch's
own kernels, bytes per token counted at the packed size, the weights' memory measured, layers a
kernel does not take kept (and named), and a device without the kernel an "unsupported" status."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from accelbench.devices import DeviceSet
from accelbench.devices.precisions import QUANTIZED_PRECISIONS, precision_spec
from accelbench.devices.quantized import kernel_for, probe
from accelbench.errors import UsageError
from accelbench.measure.generation.decode_bytes import weight_reads
from accelbench.measure.generation.quantize import (
    Int4WeightOnlyLinear,
    Int8WeightOnlyLinear,
    dequantized_int4,
    int4_weights,
    int8_weights,
    quantize_weights,
    tensor_bytes,
)
from accelbench.options.values import build_run_options
from accelbench.workloads.builtin.decoder import greedy_generate
from accelbench.workloads.builtin.llama import Llama1B

CPU = DeviceSet.current().select("cpu")[0]


def test_the_precision_table_names_the_quantized_precisions() -> None:
    assert QUANTIZED_PRECISIONS == ("int8-wo", "int4-wo", "int8-wo-torchao", "int4-wo-torchao")
    assert precision_spec("int4-wo").group_size == 128 and precision_spec("int8-wo").weight_bits == 8
    assert precision_spec("int8-wo").param_dtype == "bfloat16" and not precision_spec("bf16").quantized
    with pytest.raises(UsageError, match="int4-wo goes with --mode generate only"):
        build_run_options("gpt2", "cpu", "train", precision="int4-wo")


def test_the_kernels_compute_what_the_packed_weights_say() -> None:
    torch.manual_seed(0)
    weight = (torch.randn(64, 256) * 0.02).bfloat16().float()
    x = torch.randn(3, 256).bfloat16()
    q, scales = int8_weights(weight, torch.bfloat16)
    layer = Int8WeightOnlyLinear(weight.bfloat16(), None, kernel_for(CPU, 8))  # type: ignore[arg-type]
    expected = x.float() @ (q.float() * scales.float()[:, None]).t()
    assert torch.allclose(layer(x).float(), expected, atol=2e-2, rtol=2e-2)
    assert (weight - q.float() * scales.float()[:, None]).abs().max() <= scales.float().max() / 2 + 1e-3
    values, sz = int4_weights(weight, 128, torch.bfloat16)
    assert values.min() >= 0 and values.max() <= 15 and sz.shape == (2, 64, 2)
    layer4 = Int4WeightOnlyLinear(weight.bfloat16(), None, kernel_for(CPU, 4), 128)  # type: ignore[arg-type]
    expected4 = x.float() @ dequantized_int4(values, sz, 128).t()
    assert torch.allclose(layer4(x).float(), expected4, atol=2e-2, rtol=2e-2)
    # int4 in groups of 128: within a step of the group's (half a step, and the bf16 rounding of
    # the scale and zero point beside it)
    step = sz.float()[..., 0].t().repeat_interleave(128, dim=1)
    assert ((weight - dequantized_int4(values, sz, 128)).abs() <= step).all()


def _tiny_llama() -> tuple[Llama1B, nn.Module]:
    workload = Llama1B("tiny")
    torch.manual_seed(0)
    return workload, workload.build_model().bfloat16().eval()


@pytest.mark.parametrize("precision", ["int8-wo", "int4-wo"])
def test_bytes_per_token_are_the_packed_bytes(precision: str) -> None:
    """Issue 28 item 3: a decode step reads each quantized layer's packed weight, scales and zero
    points (buffers, not parameters): counted as stored, so the bandwidth share stays true."""
    workload, model = _tiny_llama()
    before = tensor_bytes(model)
    report = quantize_weights(model, precision, CPU)
    assert report.quantized_layers == 11 and report.kept == {}  # 2 blocks x 5 products + the output layer
    packed = [m for m in model.modules() if isinstance(m, Int8WeightOnlyLinear | Int4WeightOnlyLinear)]
    packed_bytes = sum(b.numel() * b.element_size() for m in packed for b in m.buffers())
    norms = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if "norm" in n)
    prompt = workload.make_prompt(1, 1, 0)
    with torch.no_grad():
        logits, cache = workload.prefill(model, prompt, 2)
        reads = weight_reads(lambda: workload.decode_step(model, logits.argmax(-1), cache), model)
    assert reads.total == packed_bytes + norms  # the token table is read by row: left out
    bits = precision_spec(precision).weight_bits
    weights = sum(m.in_features * m.out_features for m in packed)
    assert weights * bits / 8 < packed_bytes < weights * bits / 8 * 1.2  # scales, zero points
    assert report.packed_bytes == packed_bytes and report.weight_bytes == tensor_bytes(model) < before
    if precision == "int4-wo":  # a 64-wide model takes groups of 64, and says so
        assert set(report.smaller_groups.values()) == {64}


def test_the_output_layer_gets_a_packed_copy_and_the_tokens_stay_the_same_here() -> None:
    workload, model = _tiny_llama()
    prompt = workload.make_prompt(1, 8, 0)
    plain = greedy_generate(model, prompt, 16)
    quantized = copy.deepcopy(model)
    quantize_weights(quantized, "int8-wo", CPU)
    assert isinstance(quantized.output, Int8WeightOnlyLinear)
    assert quantized.tokens.weight.dtype == torch.bfloat16  # the embedding keeps its table
    assert torch.equal(greedy_generate(quantized, prompt, 16), plain)


def test_a_layer_the_kernel_does_not_take_stays_and_is_named() -> None:
    """65 inputs split into no group: kept and named. 65 outputs are padded to the kernel's
    multiple (issue 33: GPT-2's 50,257-way head reads int4's bytes), not kept."""
    model = nn.Sequential(nn.Linear(64, 65), nn.Linear(65, 64)).bfloat16()
    report = quantize_weights(model, "int4-wo", CPU)
    assert set(report.kept) == {"1"} and "groups" in report.kept["1"]
    assert report.padded == {"0": 15}  # the CPU's kernel takes multiples of 16 outputs
    assert isinstance(model[1], nn.Linear) and not isinstance(model[0], nn.Linear)
    assert model(torch.randn(2, 64, dtype=torch.bfloat16)).shape == (2, 64)


class _Unknown:
    name, torch_device = "fake:0", "meta"


def test_a_device_without_the_kernel_is_unsupported_not_a_crash() -> None:
    assert "cpu, cuda and mps only" in str(kernel_for(_Unknown(), 4))  # type: ignore[arg-type]
    assert "cpu, cuda and mps only" in str(probe(_Unknown(), 8, torch.bfloat16))  # type: ignore[arg-type]
    assert probe(CPU, 4, torch.bfloat16) is None and probe(CPU, 8, torch.bfloat16) is None
    with pytest.raises(NotImplementedError, match="cpu, cuda and mps only"):
        quantize_weights(nn.Linear(64, 64), "int8-wo", _Unknown())  # type: ignore[arg-type]


HF_CONFIG = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 2, "n_embd": 64,
             "n_head": 4, "n_positions": 128, "vocab_size": 512}


@pytest.mark.parametrize("workload", ["llama-1b", "gpt2", "hf"])
def test_run_generates_bf16_int8_and_int4_under_llama_bench(workload: str, cli, tmp_path: Path) -> None:
    """Issue 28 "done when": ``run W --mode generate --protocol llama-bench --precision
    bf16,int8-wo,int4-wo --device cpu --size tiny`` works for the built-in decoders and hf:
    (here a 2-layer GPT-2 config folder: transformers' Conv1D layers, offline)."""
    if workload == "hf":
        pytest.importorskip("transformers")
        folder = tmp_path / "gpt2-tiny"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(HF_CONFIG))
        workload = f"hf:{folder}"
    out = tmp_path / "r.json"
    done = cli("run", workload, "--mode", "generate", "--protocol", "llama-bench", "--precision",
               "bf16,int8-wo,int4-wo", "--device", "cpu", "--size", "tiny", "--steps", "2",
               "--isolation", "none", "--threads", "1", "--output", str(out))
    assert done.returncode == 0, done.stderr
    cases = json.loads(out.read_text())["cases"]
    assert len(cases) == 6 and all(c["status"] == "ok" for c in cases), [c["error"] for c in cases]
    assert {c["protocol"] for c in cases} == {"llama-bench"}
    read = {(c["precision"], c["generation"]["protocol"]["figure"]): c["generation"] for c in cases}
    for figure in ("pp", "tg"):
        assert read["int4-wo", figure]["protocol"]["tokens_per_s"] > 0
    tg = {p: read[p, "tg"] for p in ("bf16", "int8-wo", "int4-wo")}
    assert tg["int4-wo"]["weight_bytes_per_step"] < tg["int8-wo"]["weight_bytes_per_step"] \
        < tg["bf16"]["weight_bytes_per_step"]
    assert tg["int4-wo"]["weights_memory_bytes"] < tg["bf16"]["weights_memory_bytes"]
    assert tg["int4-wo"]["quantization"]["kernel"] == "aten._weight_int4pack_mm_for_cpu"
    assert "tokens_hash" in tg["bf16"] and "llama-bench" in done.stdout
