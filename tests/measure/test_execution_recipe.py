"""The decode execution recipe (issue 33): ``--compile BACKEND:MODE``, gpt-fast's static cache
kept across rounds and its decode step compiled fullgraph with CUDA graphs, int8's fused form and
int4's padding, and the overhead- or bandwidth-bound diagnosis of every generation row.

What this CPU cannot run (CUDA graphs) is proven under the Ampere personality: the modes passed,
recorded and labelled, end to end. The graph capture itself was measured on an H100
(docs/hardware/2026-11-27-h100-issue-33-decode-recipe/)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from accelbench.devices import DeviceSet
from accelbench.devices.compilation import CompileSpec
from accelbench.errors import UsageError
from accelbench.measure.generation.decode_bytes import (
    BANDWIDTH,
    OVERHEAD,
    judge_decode,
    weight_reads,
)
from accelbench.measure.generation.recipe import prepare_generation
from accelbench.measure.generation.rounds import measure_generation
from accelbench.options.values import build_run_options
from accelbench.workloads.builtin.decoder import greedy_generate
from accelbench.workloads.catalogue import get_workload_class

pytestmark = pytest.mark.usefixtures("one_thread")

CPU = DeviceSet.current().select("cpu")[0]
#: The recipe's path through dynamo without inductor's minutes: the eager back end takes a mode.
CHEAP_RECIPE = "eager:reduce-overhead"


# --- --compile BACKEND:MODE ---------------------------------------------------------------------
def test_compile_values_carry_a_mode_and_refuse_an_unknown_one() -> None:
    assert CompileSpec.parse("inductor:reduce-overhead") == CompileSpec("inductor", "reduce-overhead")
    assert CompileSpec.parse("inductor:default").text == "inductor"
    assert CompileSpec.parse("none").text == "" and not CompileSpec.parse("").compiled
    assert CompileSpec.parse("inductor:max-autotune").graphs
    assert not CompileSpec.parse("inductor:max-autotune-no-cudagraphs").graphs
    with pytest.raises(UsageError, match="mode 'fast' is unknown; allowed: default, reduce-overhead"):
        CompileSpec.parse("inductor:fast")
    with pytest.raises(UsageError, match="without a back end"):
        CompileSpec.parse(":reduce-overhead")


def test_a_bad_compile_mode_is_one_line_and_exit_2(inline_cli) -> None:
    done = inline_cli("run", "mnist", "--compile", "inductor:turbo", "--size", "tiny")
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "turbo" in done.stderr
    assert "Traceback" not in done.stderr


def test_gpt_fast_applies_its_recipe_where_compile_is_not_given() -> None:
    options = build_run_options(["llama-1b"], "cpu", "generate", protocol="gpt-fast", size="tiny")
    assert options.compile_backends == ("inductor:reduce-overhead",)
    eager = build_run_options(["llama-1b"], "cpu", "generate", protocol="gpt-fast", size="tiny",
                              compile="none")
    assert eager.compile_backends == ("",)
    plain = build_run_options(["llama-1b"], "cpu", "generate", size="tiny")
    assert plain.compile_backends == ("",)


# --- the kept static cache and the fullgraph decode step ----------------------------------------
def _tiny(name: str = "llama-1b") -> tuple[object, nn.Module]:
    workload = get_workload_class(name)("tiny")
    torch.manual_seed(0)
    return workload, workload.build_model().eval()


def test_a_graph_mode_keeps_one_static_cache_and_decodes_what_eager_decodes() -> None:
    workload, model = _tiny()
    prompt = workload.make_prompt(1, 5, seed=0)
    eager_tokens = greedy_generate(model, prompt, 9)
    runner = prepare_generation(model, CHEAP_RECIPE, CPU, workload, "llama-1b")
    addresses = []
    with torch.no_grad(), runner.settings():
        for _ in range(3):
            figures = measure_generation(workload, runner.prefill, CPU, prompt_len=5, new_tokens=9,
                                         rounds=1, warmup_rounds=0, decode_model=runner.decode)
            cache = model.kept_cache
            assert cache is not None
            addresses.append((cache.keys[0].data_ptr(), cache.values[-1].data_ptr(),
                              cache.position.data_ptr()))
    runner.confirm()
    # One cache for every round (its addresses are what a captured graph replays) ...
    assert len(set(addresses)) == 1, addresses
    for tensor in (cache.keys[0], cache.values[0], cache.position, cache.slots):
        assert getattr(tensor, "_dynamo_static_input_type", None) is not None
    # ... whose stale positions are masked: the tokens are eager's.
    assert figures.tokens == tuple(tuple(row) for row in eager_tokens.tolist())
    execution = runner.finish().to_dict()
    assert execution["kv_cache"] == "static, kept" and execution["prefill"] == "eager"
    assert execution["decode"] == "compiled, fullgraph"
    assert execution["cuda_graphs"].startswith("none: cpu has no graph capture")


def test_the_decode_step_is_compiled_fullgraph(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph break in the decode step would leave launches on the host between graphs: under
    the recipe it is an error, not a silent fall back (gpt-fast's fullgraph=True)."""
    from accelbench.workloads.builtin import decoder

    workload, model = _tiny()
    original = decoder.Decoder.forward

    def breaking(self: nn.Module, ids: torch.Tensor, cache: object = None) -> torch.Tensor:
        torch._dynamo.graph_break()
        return original(self, ids, cache)

    monkeypatch.setattr(decoder.Decoder, "forward", breaking)
    runner = prepare_generation(model, CHEAP_RECIPE, CPU, workload, "llama-1b")
    with torch.no_grad(), pytest.raises(Exception, match="graph_break|graph break"):
        measure_generation(workload, runner.prefill, CPU, prompt_len=3, new_tokens=4, rounds=1,
                           warmup_rounds=0, decode_model=runner.decode)


def test_a_growing_cache_refuses_a_graph_mode() -> None:
    from accelbench.workloads.base import Workload

    class Growing(Workload):
        """A decoder whose cache grows a position a token (the contract's default kind)."""

        name = "growing"

        def build_model(self) -> nn.Module:
            return nn.Linear(2, 2)

        def make_batches(self, mode: str, batch_size: int, options: object) -> list:
            return []

    with pytest.raises(NotImplementedError, match="dynamic key/value cache.*static cache"):
        prepare_generation(nn.Linear(2, 2), CHEAP_RECIPE, CPU, Growing("tiny"), "growing")


def test_an_hf_model_keeps_transformers_static_cache_under_a_graph_mode(tiny_hf_llama: str) -> None:
    """hf: models grow transformers' DynamicCache by default; under a graph mode they keep its
    StaticCache (generate(cache_implementation="static")'s), decoding the same greedy tokens."""
    workload = get_workload_class(tiny_hf_llama)("tiny")
    assert workload.kv_cache_kind == "dynamic"
    torch.manual_seed(0)
    model = workload.build_model().eval()
    eager = measure_generation(workload, model, CPU, prompt_len=5, new_tokens=6, rounds=1,
                               warmup_rounds=0)
    runner = prepare_generation(model, CHEAP_RECIPE, CPU, workload, "hf")
    with torch.no_grad(), runner.settings():
        figures = [measure_generation(workload, runner.prefill, CPU, prompt_len=5, new_tokens=6, rounds=1,
                                      warmup_rounds=0, decode_model=runner.decode) for _ in range(2)]
    runner.confirm()
    assert [f.tokens for f in figures] == [eager.tokens, eager.tokens]
    kept = workload._static[(1, 11)].cache
    assert type(kept).__name__ == "StaticCache"
    assert runner.finish().kv_cache == "static, kept"


# --- int8 fused, int4 padded --------------------------------------------------------------------
def test_int4_pads_an_output_count_off_the_kernels_multiple() -> None:
    from accelbench.measure.generation.quantize import dequantized_int4, int4_weights, quantize_weights

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 50, bias=False)).to(torch.bfloat16)
    weight = model[0].weight.detach().clone()
    report = quantize_weights(model, "int4-wo", CPU)
    assert report.kept == {} and report.padded == {"0": 14}  # the CPU's kernel: multiples of 16
    x = torch.randn(3, 128, dtype=torch.bfloat16)
    values, scales = int4_weights(weight, 128, torch.bfloat16)
    expected = x.float() @ dequantized_int4(values, scales, 128).t()
    got = model(x)
    assert got.shape == (3, 50)
    assert torch.allclose(got.float(), expected, atol=0.05, rtol=0.02)


def test_fused_int8_is_counted_as_the_int8_it_reads() -> None:
    """Under inductor the cast of gpt-fast's int8 form is fused into the product: a decode step
    reads one byte a weight, not the cast's read, write and read (an H100 read it as 191% of
    the bandwidth before)."""
    from accelbench.devices.quantized import FUSED_INT8
    from accelbench.measure.generation.quantize import Int8WeightOnlyLinear

    weight = torch.randn(64, 128, dtype=torch.bfloat16)
    layer = Int8WeightOnlyLinear(weight, None, FUSED_INT8)
    x = torch.randn(1, 128, dtype=torch.bfloat16)
    reads = weight_reads(lambda: layer(x), layer)
    assert reads.total == 64 * 128 * 1 + 64 * 2, reads.by_read
    assert any("fused" in how for how in reads.by_read)
    reference = x.float() @ (layer.weight.float() * layer.scales.float()[:, None]).t()
    assert torch.allclose(layer(x).float(), reference, rtol=0.02, atol=0.02)


def test_int8_fuses_only_where_inductor_fuses_it() -> None:
    from accelbench.devices.quantized import kernel_for

    assert not getattr(kernel_for(CPU, 8, fused=True), "fused", True)  # the CPU keeps the kernel
    assert not getattr(kernel_for(CPU, 8), "fused", True)


# --- the decode bound ---------------------------------------------------------------------------
def test_a_decode_far_above_its_floor_is_overhead_bound() -> None:
    bound = judge_decode(tpot_s=3e-3, bytes_per_step=2_500_000_000, bandwidth_bytes_per_s=4.2e12,
                         host_cpu="Some Xeon")
    assert bound.bound == OVERHEAD and bound.ratio == pytest.approx(3e-3 / (2.5e9 / 4.2e12))
    assert "overhead-bound (host launches, Some Xeon)" in bound.words
    near = judge_decode(tpot_s=1.4e-3, bytes_per_step=2_475_000_000, bandwidth_bytes_per_s=2.988e12,
                        host_cpu="Some Xeon")
    assert near.bound == BANDWIDTH and near.words == "bandwidth-bound: 59% of measured bandwidth"
    with pytest.raises(ValueError):
        judge_decode(0.0, 1, 1.0, "x")


# --- end to end under the Ampere personality ----------------------------------------------------
def test_the_graph_recipe_is_passed_recorded_and_labelled_on_ampere(
        personality_env, tmp_path: Path, accelbench_home: Path) -> None:
    env, journal = personality_env("ampere")
    output = tmp_path / "record.json"
    done = subprocess.run(
        # gpt-fast's recipe as its protocol applies it (test above), at lengths an emulated GPU
        # decodes in seconds (each emulated op goes through Python).
        [sys.executable, "-m", "accelbench", "run", "llama-1b", "--device", "cuda", "--mode", "generate",
         "--compile", "inductor:reduce-overhead", "--precision", "bf16,int8-wo", "--size", "tiny",
         "--prompt-len", "4", "--new-tokens", "8", "--isolation", "none", "--steps", "2",
         "--output", str(output)],
        capture_output=True, text=True, timeout=400,
        env={**os.environ, "ACCELBENCH_HOME": str(accelbench_home), "COLUMNS": "160", **env})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    import json

    cases = json.loads(output.read_text())["cases"]
    assert [c["status"] for c in cases] == ["ok", "ok"], [c.get("error") for c in cases]
    for case in cases:
        assert case["compile_backend"] == "inductor:reduce-overhead"
        execution = case["generation"]["execution"]
        assert execution["decode"] == "compiled, fullgraph" and execution["prefill"] == "eager"
        assert execution["cuda_graphs"].startswith("captured")
        assert "coordinate_descent_tuning" in execution["settings"]
        assert case["generation"]["decode_bound"] in (OVERHEAD, BANDWIDTH)
        assert case["generation"]["decode_floor_s"] > 0
    int8 = cases[1]["generation"]["quantization"]["kernel"]
    assert "fused" in int8, int8  # on CUDA under inductor: gpt-fast's form
    asked = [e for e in journal.entries("compile")]
    assert asked and all(e["mode"] == "reduce-overhead" and e["fullgraph"] for e in asked), asked
    assert "compile:inductor:reduce-overhead +graphs" in done.stdout
    assert "prefill eager; decode compiled, fullgraph" in done.stdout


def test_check_decodes_by_the_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """``check --mode generate`` with a graph mode runs the run's recipe: the candidate follows the
    fp64 reference, and its decode step is compiled fullgraph (a graph break there fails the check,
    where the eager candidate passes)."""
    from accelbench.devices.numerics import get_precision
    from accelbench.parity.generation import run_generation_check
    from accelbench.workloads.builtin import decoder

    workload, _ = _tiny()

    def check(compile_backend: str) -> object:
        return run_generation_check(workload, workload.build_model, CPU, get_precision("fp32"),
                                    prompt_len=4, new_tokens=6, compile_backend=compile_backend)

    assert check(CHEAP_RECIPE).verdict == "pass"
    original = decoder.Decoder.forward

    def breaking(self: nn.Module, ids: torch.Tensor, cache: object = None) -> torch.Tensor:
        torch._dynamo.graph_break()
        return original(self, ids, cache)

    monkeypatch.setattr(decoder.Decoder, "forward", breaking)
    assert check("").verdict == "pass"
    broken = check(CHEAP_RECIPE)
    assert broken.verdict == "failed" and "graph" in (broken.error or "").lower(), broken
