"""Issue 28 item 3: torchao's ``quantize_`` where it is installed (``int8-wo-torchao``,
``int4-wo-torchao``), never required: without it a case is "unsupported" with the reason. The
wiring is held to a stand-in with torchao's API shape (``quantize_`` swapping each ``nn.Linear``
weight for a packed tensor subclass and setting inductor's global config, as torchao's does),
so it is tested where torchao is not installed; the tests marked below run the real torchao
where it is (``pytest.importorskip``).

Issue 33 (measure/generation/torchao_quant.py): torchao's documented configs for the in-house
schemes, the bytes an eager decode step really reads from a packed weight (a cast of the whole
weight each step is a cast: read, write, read), inductor's config as found after a torchao case,
and every linear layer torchao kept named (transformers' Conv1D too)."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._pytree import tree_map

from accelbench.devices import DeviceSet
from accelbench.measure.generation.decode_bytes import stored_bytes, weight_reads
from accelbench.measure.generation.quantize import (
    int8_weights,
    quantize_weights,
    tensor_bytes,
)
from accelbench.measure.generation.torchao_quant import torchao_unsupported
from accelbench.workloads.builtin.llama import Llama1B

CPU = DeviceSet.current().select("cpu")[0]


class PackedWeight(torch.Tensor):
    """int8 values and a scale per row behind a bf16 [n, k] face (torchao's kind of tensor)."""

    @staticmethod
    def __new__(cls, values: torch.Tensor, scales: torch.Tensor) -> PackedWeight:
        return torch.Tensor._make_wrapper_subclass(cls, values.shape, dtype=scales.dtype,  # type: ignore[attr-defined]
                                                   device=values.device)

    def __init__(self, values: torch.Tensor, scales: torch.Tensor) -> None:
        self.values, self.scales = values, scales

    def __tensor_flatten__(self) -> tuple[list[str], Any]:
        return ["values", "scales"], None

    def dequantized(self) -> torch.Tensor:
        return self.values.to(self.dtype) * self.scales[:, None]

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in (torch.ops.aten.detach.default, torch.ops.aten.alias.default):
            return args[0]

        def plain(value: Any) -> Any:
            return value.dequantized() if isinstance(value, PackedWeight) else value
        return func(*tree_map(plain, args), **tree_map(plain, kwargs or {}))

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.linear:
            weight = args[1]
            return F.linear(args[0], weight.dequantized().to(args[0].dtype), *args[2:])
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


def _fake_torchao() -> types.ModuleType:
    package, api = types.ModuleType("torchao"), types.ModuleType("torchao.quantization")

    class Int8WeightOnlyConfig:
        pass

    class Int4WeightOnlyConfig:
        def __init__(self, group_size: int = 128) -> None:
            self.group_size = group_size

    def quantize_(model: nn.Module, config: Any) -> None:
        # torchao's recommended_inductor_config_setter, and what torchao before 0.18 did too
        torch._inductor.config.coordinate_descent_tuning = True
        torch._inductor.config.force_fuse_int_mm_with_mul = True
        torch.set_float32_matmul_precision("high")
        for module in model.modules():
            if isinstance(module, nn.Linear):
                values, scales = int8_weights(module.weight.detach(), module.weight.dtype)
                module.weight = nn.Parameter(PackedWeight(values, scales), requires_grad=False)

    api.Int8WeightOnlyConfig, api.Int4WeightOnlyConfig = Int8WeightOnlyConfig, Int4WeightOnlyConfig
    api.quantize_ = quantize_
    package.quantization = api
    return package


@pytest.fixture
def fake_torchao(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    package = _fake_torchao()
    monkeypatch.setitem(sys.modules, "torchao", package)
    monkeypatch.setitem(sys.modules, "torchao.quantization", package.quantization)
    yield


def test_without_torchao_the_case_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torchao", None)  # an import of it fails, as where not installed
    reason = torchao_unsupported(CPU, "int4-wo-torchao")
    assert reason and "torchao is not installed" in reason
    with pytest.raises(NotImplementedError, match="torchao is not installed"):
        quantize_weights(nn.Linear(8, 8), "int8-wo-torchao", CPU)


def test_torchao_quantizes_every_linear_and_its_packed_bytes_are_counted(fake_torchao: None) -> None:
    assert torchao_unsupported(CPU, "int8-wo-torchao") is None
    workload = Llama1B("tiny")
    torch.manual_seed(0)
    model = workload.build_model().bfloat16().eval()
    report = quantize_weights(model, "int8-wo-torchao", CPU)
    assert report.library == "torchao" and report.quantized_layers == 11 and report.kept == {}
    assert report.kernel == ("torchao unknown quantize_ (Int8WeightOnlyConfig() (int8 symmetric per "
                             "output channel))")  # the stand-in has no version
    packed = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    assert all(isinstance(w, PackedWeight) for w in packed)
    assert stored_bytes(packed[0]) == packed[0].numel() * 1 + packed[0].shape[0] * 2  # int8 + bf16 scales
    assert report.packed_bytes == sum(stored_bytes(w) for w in packed)
    others = {id(t): t for t in (*model.parameters(), *model.buffers()) if not isinstance(t, PackedWeight)}
    assert report.weight_bytes == tensor_bytes(model) == report.packed_bytes + sum(
        t.numel() * t.element_size() for t in others.values())
    prompt = workload.make_prompt(1, 1, 0)
    with torch.no_grad():
        logits, cache = workload.prefill(model, prompt, 2)
        reads = weight_reads(lambda: workload.decode_step(model, logits.argmax(-1), cache), model)
    # The stand-in's eager product dequantises: its int8 values cast to bf16 each step (read 1
    # byte, write 2, read 2), its bf16 scales read as stored.
    values = sum(w.values.numel() for w in packed)
    assert reads.by_read == {
        "PackedWeight (packed): int8 cast to bfloat16 every step (read, write, read)": values * 5,
        "PackedWeight (packed) as stored": sum(w.scales.numel() * 2 for w in packed),
        "bfloat16 as stored": sum(p.numel() * 2 for n, p in model.named_parameters() if "norm" in n)}


def test_a_run_without_torchao_reports_unsupported(cli, tmp_path: Path) -> None:
    if importlib.util.find_spec("torchao") is not None:
        pytest.skip("torchao is installed here")
    out = tmp_path / "r.json"
    done = cli("run", "gpt2", "--mode", "generate", "--precision", "int8-wo-torchao", "--device", "cpu",
               "--size", "tiny", "--prompt-len", "4", "--new-tokens", "4", "--steps", "1",
               "--isolation", "none", "--output", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    assert case["status"] == "unsupported" and "torchao is not installed" in case["error"]


# --- issue 33: the configs, the bytes, inductor's config, the kept layers --------------------------
@pytest.fixture
def gpt2() -> nn.Module:
    """transformers' GPT-2 (its layers are ``Conv1D``; the head an ``nn.Linear`` tied to the
    token table), tiny and in bf16; built before a stand-in torchao is installed (transformers
    looks torchao up as it imports its model classes)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=128, n_head=2, vocab_size=256, n_positions=32,
                                      eos_token_id=0, bos_token_id=0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).bfloat16().eval()


GPT2_CONV1D = ("transformer.h.0.attn.c_attn", "transformer.h.0.attn.c_proj", "transformer.h.0.mlp.c_fc",
               "transformer.h.0.mlp.c_proj")


def test_kept_layers_are_named_by_module_and_conv1d_is_among_them(gpt2: nn.Module,
                                                                    fake_torchao: None) -> None:
    """torchao's default filter takes nn.Linear only: GPT-2's Conv1D layers stay in bf16, each
    named by its dotted module name with the reason; the head (an nn.Linear) is packed."""
    model = gpt2
    report = quantize_weights(model, "int8-wo-torchao", CPU)
    assert report.quantized_layers == 1 and isinstance(model.lm_head.weight, PackedWeight)
    assert set(report.kept) == set(GPT2_CONV1D)
    assert all("Conv1D" in reason and "nn.Linear" in reason for reason in report.kept.values())


def test_torchao_leaves_inductor_config_as_found_and_the_case_alone_sees_its_settings(
        fake_torchao: None) -> None:
    """quantize_ sets inductor's global config (torchao's recommended_inductor_config_setter):
    put back as soon as it returns, recorded, and applied around the case's run only."""
    import torch._inductor.config as inductor

    from accelbench.measure.generation.torchao_quant import MATMUL_PRECISION, case_settings

    with inductor.patch(coordinate_descent_tuning=False, force_fuse_int_mm_with_mul=False):
        before, precision = inductor.get_config_copy(), torch.get_float32_matmul_precision()
        assert torchao_unsupported(CPU, "int8-wo-torchao") is None
        assert inductor.get_config_copy() == before
        report = quantize_weights(nn.Sequential(nn.Linear(8, 8)), "int8-wo-torchao", CPU)
        assert inductor.get_config_copy() == before
        assert torch.get_float32_matmul_precision() == precision
        assert report.inductor_settings == {"coordinate_descent_tuning": True,
                                            "force_fuse_int_mm_with_mul": True,
                                            MATMUL_PRECISION: "high"}
        assert report.to_dict()["inductor_settings"] == report.inductor_settings
        with case_settings(report):
            assert inductor.coordinate_descent_tuning and inductor.force_fuse_int_mm_with_mul
            assert torch.get_float32_matmul_precision() == precision  # never applied again
        assert inductor.get_config_copy() == before


def test_a_packed_weight_read_as_stored_or_its_cast_fused(fake_torchao: None) -> None:
    """An inner tensor the product reads directly counts as stored; a cast that the compiled
    product fuses (FUSED_READ on the weight) counts once, as stored."""
    from accelbench.measure.generation.decode_bytes import FUSED_READ

    layer = nn.Sequential(nn.Linear(64, 32, bias=False, dtype=torch.bfloat16))
    assert quantize_weights(layer, "int8-wo-torchao", CPU).quantized_layers == 1
    weight = layer[0].weight
    x = torch.ones(1, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        cast = weight_reads(lambda: layer(x), layer).by_read
        setattr(weight, FUSED_READ, True)
        fused = weight_reads(lambda: layer(x), layer).by_read
    assert cast["PackedWeight (packed): int8 cast to bfloat16 every step (read, write, read)"] == 32 * 64 * 5
    assert fused == {"PackedWeight (packed): int8 as stored (its cast fused into the product)": 32 * 64,
                     "PackedWeight (packed) as stored": 32 * 2}


# --- the same, with torchao itself ------------------------------------------------------------
def test_torchao_configs_are_its_documented_ones_for_the_in_house_schemes() -> None:
    pytest.importorskip("torchao")
    from accelbench.devices.precisions import precision_spec
    from accelbench.measure.generation.torchao_quant import torchao_config

    int8, _ = torchao_config(precision_spec("int8-wo-torchao"), CPU)
    assert type(int8).__name__ == "Int8WeightOnlyConfig" and int8.group_size is None
    assert type(int8.granularity).__name__ == "PerRow"  # per output channel
    cuda = types.SimpleNamespace(torch_device="cuda", name="cuda:0")
    int4, words = torchao_config(precision_spec("int4-wo-torchao"), cuda)  # type: ignore[arg-type]
    assert (int4.group_size, int4.int4_packing_format, int4.int4_choose_qparams_algorithm) == (
        128, "tile_packed_to_4d", "tinygemm")
    assert "tile_packed_to_4d" in words
    cpu4, _ = torchao_config(precision_spec("int4-wo-torchao"), CPU)
    assert cpu4.group_size == 128 and cpu4.int4_choose_qparams_algorithm == "tinygemm"
    assert getattr(cpu4, "int4_packing_format", "opaque") == "opaque"  # the CPU's layout


def test_torchao_int8_is_the_in_house_scheme_and_its_eager_cast_is_counted() -> None:
    """Symmetric per output channel, scale max|w| / 127.5 (torchao rounds it to bf16 first, so a
    value may land one step away); an eager step casts each whole int8 weight to bf16."""
    pytest.importorskip("torchao")
    workload = Llama1B("tiny")
    torch.manual_seed(0)
    model = workload.build_model().bfloat16().eval()
    model.untie_output()  # as quantize_weights does: the head a module of its own, packed too
    originals = {n: m.weight.detach().clone() for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    report = quantize_weights(model, "int8-wo-torchao", CPU)
    assert report.quantized_layers == len(originals) == 11 and report.kept == {}
    assert report.library_version and report.to_dict()["library_version"] == report.library_version
    packed = {n: m.weight for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    for name, original in originals.items():
        q, scales = int8_weights(original, torch.float32)
        assert (packed[name].qdata.int() - q.int()).abs().max() <= 1
        assert torch.allclose(packed[name].scale.flatten(), scales, rtol=2**-8)
    prompt = workload.make_prompt(1, 1, 0)
    with torch.no_grad():
        logits, cache = workload.prefill(model, prompt, 2)
        reads = weight_reads(lambda: workload.decode_step(model, logits.argmax(-1), cache), model)
    elements = sum(w.qdata.numel() for w in packed.values())
    rows = sum(w.scale.numel() for w in packed.values())
    assert reads.by_read["Int8Tensor (packed): int8 cast to bfloat16 every step (read, write, read)"] \
        == elements * 5
    assert reads.by_read["Int8Tensor (packed): float32 cast to bfloat16 every step (read, write, read)"] \
        == rows * 8
    assert not any("zero_point" in k for k in reads.by_read)


def test_torchao_int4_is_read_packed() -> None:
    """tinygemm's int4 product reads the packed weight and its scales and zero points as stored."""
    pytest.importorskip("torchao")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 128, dtype=torch.bfloat16), nn.ReLU(),
                          nn.Linear(128, 256, dtype=torch.bfloat16), nn.Linear(64, 64, dtype=torch.bfloat16))
    x = torch.randn(1, 256, dtype=torch.bfloat16)
    with torch.no_grad():
        expected = model[2](model[1](model[0](x)))
    report = quantize_weights(model, "int4-wo-torchao", CPU)
    if report.quantized_layers == 0:
        pytest.skip(f"torchao's int4 does not run here: {report.kept}")
    assert report.quantized_layers == 2
    assert report.kept == {"3": "64 inputs do not split into torchao's groups of 128: torchao leaves it"}
    with torch.no_grad():
        got = model[2](model[1](model[0](x)))
        reads = weight_reads(lambda: model[2](model[1](model[0](x))), model).by_read
    assert (got.float() - expected.float()).abs().max() < 0.1 * expected.float().abs().max()
    weights = [model[0].weight, model[2].weight]
    assert reads == {f"{type(weights[0]).__name__} (packed) as stored": sum(stored_bytes(w) for w in weights),
                     "bfloat16 as stored": (128 + 256) * 2}


def test_torchao_keeps_gpt2_conv1d_by_name(gpt2: nn.Module) -> None:
    pytest.importorskip("torchao")
    model = gpt2
    report = quantize_weights(model, "int8-wo-torchao", CPU)
    assert report.quantized_layers == 1 and set(report.kept) == set(GPT2_CONV1D)
    with torch.no_grad():
        assert model(torch.tensor([[1, 2, 3]])).logits.shape == (1, 3, 256)


COMPILE_SEEN = "accelbench-test-inductor-config"
SEEN: list[bool] = []


def _seeing_backend(graph: torch.fx.GraphModule, inputs: Any) -> Any:
    """A back end that notes torchao's inductor setting at compile time and runs the graph."""
    SEEN.append(bool(torch._inductor.config.force_fuse_int_mm_with_mul))
    return graph.forward


torch._dynamo.register_backend(_seeing_backend, name=COMPILE_SEEN)


def test_a_torchao_case_compiles_under_its_settings_and_the_next_case_starts_from_torchs() -> None:
    """A warm worker's cases run in one process: a torchao case compiles under torchao's inductor
    settings and leaves the config as it found it (torch's defaults here) for the next case."""
    pytest.importorskip("torchao")
    import torch._inductor.config as inductor

    from accelbench.engine.case import plan
    from accelbench.engine.measure_case import run_case
    from accelbench.options.values import build_run_options

    torch._dynamo.reset()
    SEEN.clear()
    with inductor.patch(coordinate_descent_tuning=False, force_fuse_int_mm_with_mul=False,
                        coordinate_descent_check_all_directions=False):
        before = inductor.get_config_copy()
        options = build_run_options("llama-1b", "cpu", "generate", size="tiny", prompt_len=4,
                                    new_tokens=3, steps=1, warmup=0, compile=COMPILE_SEEN,
                                    precision="int8-wo-torchao,bf16", isolation="none")
        torchao_case, bf16_case = sorted(plan(options, DeviceSet.current()),
                                         key=lambda c: c.precision != "int8-wo-torchao")
        result = run_case(torchao_case, options)
        assert result.ok, result.error
        assert inductor.get_config_copy() == before
        section = result.generation.quantization if result.generation else None
        assert section is not None and section.inductor_settings is not None
        assert section.inductor_settings["force_fuse_int_mm_with_mul"] is True
        assert section.library == "torchao" and section.library_version
        assert SEEN and all(SEEN)
        SEEN.clear()
        torch._dynamo.reset()
        assert run_case(bf16_case, options).ok
        assert SEEN and not any(SEEN)
        assert inductor.get_config_copy() == before
    torch._dynamo.reset()
