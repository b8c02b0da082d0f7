"""``run --mode generate``: greedy decoding with the KV cache as a case of its own, end to end
through the CLI and a worker process, with its figures in the result and its own table; the bad
values of the generation options are one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.devices import DeviceSet
from accelbench.engine.case import plan
from accelbench.measure.loop.stop import StopRule
from accelbench.options import RunOptions
from accelbench.options.values import build_run_options
from accelbench.results.key import key_json


def test_run_generate_end_to_end_in_a_worker(cli, tmp_path: Path) -> None:
    out = tmp_path / "gen.json"
    done = cli("run", "nanogpt-char", "--size", "tiny", "--device", "cpu", "--mode", "generate",
               "--prompt-len", "8", "--new-tokens", "5", "--steps", "2", "--quiet", "-o", str(out))
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    assert (case["status"], case["mode"], case["prompt_len"], case["new_tokens"]) == (
        "ok", "generate", 8, 5)
    figures = case["generation"]
    assert len(figures["rounds"]) == 2 and figures["new_tokens"] == 5
    assert figures["ttft_s"] > 0 and figures["decode_tokens_per_s"] > 0
    # Prefill tokens/s is B x P over the median round's time to first token (TTFT's statistic).
    ttfts = sorted(r["ttft_s"] for r in figures["rounds"])
    assert figures["prefill_tokens_per_s"] == pytest.approx(8 / (sum(ttfts) / 2))
    # on the CPU every decode step is timed by the host: 4 per round (the first token is prefill's)
    assert len(case["step_times"]) == 2 * 4
    assert "generation rounds" in case["stop_rule"]
    assert "Generation (greedy, KV cache)" in done.stdout and "8/5" in done.stdout.replace(" ", "")
    # On a 100-column terminal the table fits and no word is cut ("nanogpt-…").
    import io

    from rich.console import Console

    from accelbench.render.generation_table import generation_table
    from accelbench.results import RunRecord

    narrow = io.StringIO()
    Console(file=narrow, width=100).print(generation_table(RunRecord.from_dict(json.loads(out.read_text()))))
    assert all(len(line) <= 100 for line in narrow.getvalue().splitlines())
    assert "…" not in narrow.getvalue() and "nanogpt-char" in narrow.getvalue()
    assert case["flops"] is None  # FLOP/s are a training and eval figure
    report = tmp_path / "report.html"
    made = cli("report", str(out), "-o", str(report))
    assert made.returncode == 0, made.stderr
    html = report.read_text()
    assert "Generation: time to first token and tokens/s" in html and "prefill tok/s" in html
    history = cli("history", "--workload", "nanogpt-char", "--mode", "generate")
    assert history.returncode == 0, history.stderr
    assert "decode tokens/s (all sequences) over time" in history.stdout
    assert "prompt 8 +5" in history.stdout


@pytest.mark.parametrize(("args", "needle"), [
    (["--prompt-len", "0"], "--prompt-len"),
    (["--new-tokens", "x"], "--new-tokens takes whole numbers"),
    (["--prompt-len", "40"], "do not fit"),  # tiny nanogpt-char: a context of 32 tokens
])
def test_bad_generation_values_are_one_line(inline_cli, args: list[str], needle: str) -> None:
    done = inline_cli("run", "nanogpt-char", "--size", "tiny", "--device", "cpu", "--mode",
                      "generate", *args)
    assert done.returncode == 2
    assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_generate_on_a_model_that_is_not_a_decoder_is_a_usage_error(inline_cli) -> None:
    done = inline_cli("run", "mnist", "--size", "tiny", "--device", "cpu", "--mode", "generate")
    assert done.returncode == 2
    assert "needs a decoder" in done.stderr and "'mnist'" in done.stderr


def test_plan_pairs_every_prompt_with_every_new_token_count_and_defaults_to_the_context() -> None:
    devices = DeviceSet.current()
    options = build_run_options(["nanogpt-char"], "cpu", "train,generate", size="tiny",
                                prompt_len="4,8", new_tokens=[2, 3])
    cases = plan(options, devices)
    generated = [(c.prompt_len, c.new_tokens, c.batch_size) for c in cases if c.mode == "generate"]
    assert generated == [(4, 2, 1), (8, 2, 1), (4, 3, 1), (8, 3, 1)]
    assert [c.mode for c in cases].count("train") == 1
    # No prompt length: 512, or the context (32 at tiny) minus the new tokens where shorter.
    default = plan(RunOptions(workloads=("nanogpt-char",), modes=("generate",), size="tiny",
                              new_tokens=(5,)), devices)
    assert [(c.prompt_len, c.new_tokens) for c in default] == [(27, 5)]


def test_a_suite_skips_generation_for_workloads_that_cannot_generate() -> None:
    options = RunOptions(workloads=("mnist", "nanogpt-char"), modes=("generate",), size="tiny",
                         suite="quick", new_tokens=(4,))
    assert [c.workload for c in plan(options, DeviceSet.current())] == ["nanogpt-char"]


def test_stored_keys_of_train_cases_are_unchanged_by_the_generation_fields() -> None:
    """The history matches runs on the stored key: a training case's key has no generation fields,
    as before they existed; a generation case's key has both."""
    train = json.loads(key_json({"workload": "mnist", "mode": "train", "batch_size": 64}))
    assert "prompt_len" not in train and "new_tokens" not in train
    generate = json.loads(key_json({"workload": "gpt2", "mode": "generate", "batch_size": 1,
                                    "prompt_len": 512, "new_tokens": 128}))
    assert (generate["prompt_len"], generate["new_tokens"]) == (512, 128)


def test_decoder_training_reports_tokens_per_second_beside_samples() -> None:
    from accelbench.engine.measure_case import run_case
    from accelbench.options import StopRule

    options = RunOptions(workloads=("nanogpt-char",), size="tiny", stop=StopRule("steps", 3),
                         warmup_steps=1, isolation="none")
    (case,) = plan(options, DeviceSet.current())
    result = run_case(case, options)
    assert result.ok, result.error
    assert result.tokens_per_sample == 32  # the tiny context: one sample is 32 characters
    assert result.tokens_per_s() == pytest.approx(result.throughput() * 32)
    assert result.to_dict()["derived"]["throughput_tokens_per_s"] == pytest.approx(
        result.tokens_per_s())
    from accelbench.render.table import rate_cell

    assert "tok/s" in rate_cell(result)


FAULTY = '''
import torch

import accelbench
from accelbench.workloads.builtin.nanogpt_char import NanoGPTChar


@accelbench.register
class FaultyDecoder(NanoGPTChar):
    """nanogpt-char whose decode step goes wrong below fp64 (as a broken kernel would on a
    device): a large bias towards token 3."""

    name = "faulty-decoder"

    def decode_step(self, model, tokens, cache):
        logits, cache = super().decode_step(model, tokens, cache)
        if logits.dtype != torch.float64:
            logits = logits.clone()
            logits[..., 3] += 1000.0
        return logits, cache
'''


@pytest.mark.parametrize("workload", ["nanogpt-char", "faulty-decoder"])
def test_check_generate_passes_in_bf16_and_fails_on_a_planted_fault(cli, tmp_path: Path,
                                                                     workload: str) -> None:
    faulty = tmp_path / "faulty.py"
    faulty.write_text(FAULTY)
    out = tmp_path / "check.json"
    done = cli("check", workload, "--workload-file", str(faulty), "--size", "tiny", "--device",
               "cpu", "--precision", "bf16", "--mode", "generate", "--prompt-len", "8",
               "--new-tokens", "6", "--quiet", "-o", str(out))
    (case,) = json.loads(out.read_text())["cases"]
    verdict = case["generation"]["parity"]
    if workload == "nanogpt-char":
        assert done.returncode == 0, done.stdout + done.stderr
        assert case["status"] == "ok" and verdict["verdict"] in ("pass", "drift")
    else:
        assert done.returncode == 1
        assert case["status"] == "failed" and verdict["verdict"] == "diverged"
        assert verdict["position"] is not None and verdict["candidate_token"] == 3
        assert "diverged" in done.stdout


def _small_llama(folder: Path) -> str:
    transformers = pytest.importorskip("transformers")
    transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                             max_position_embeddings=64).save_pretrained(folder)
    return f"hf:{folder}"


def test_a_small_llama_from_a_folder_generates_what_transformers_generates(tmp_path: Path) -> None:
    """hf: causal LMs generate through transformers' own cache: the same greedy tokens as the
    library's generate(), and a generation case measures them."""
    import torch

    from accelbench.engine.measure_case import run_case
    from accelbench.parity.generation import greedy_with_logits
    from accelbench.workloads.catalogue import get_workload_class

    name = _small_llama(tmp_path / "llama")
    workload = get_workload_class(name)("tiny")
    assert workload.context_length() == 64
    torch.manual_seed(0)
    model = workload.build_model().eval()
    prompt = workload.make_prompt(2, 6, seed=1)
    with torch.no_grad():
        ours, _ = greedy_with_logits(workload, model, prompt, 5)
        theirs = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                max_new_tokens=5, min_new_tokens=5, pad_token_id=0)
    assert torch.equal(ours, theirs[:, 6:])
    # KV bytes: 2 (K and V) x 2 layers x batch 2 x 11 positions x 2 KV heads x 16 dims x 4 bytes
    assert workload.kv_cache_bytes(2, 11, torch.float32) == 2 * 2 * 2 * 11 * 2 * 16 * 4

    options = RunOptions(workloads=(name,), modes=("generate",), size="tiny", prompt_lens=(6,),
                         new_tokens=(4,), isolation="none", warmup_steps=0, stop=StopRule("steps", 3))
    (case,) = plan(options, DeviceSet.current())
    result = run_case(case, options)
    assert result.ok, result.error
    assert result.generation is not None and result.generation.rounds is not None
    assert (result.generation.decode_tokens_per_s or 0) > 0 and len(result.generation.rounds) == 3


def test_hf_gpt2_generates_through_the_cli(cli, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    out = tmp_path / "gpt2.json"
    done = cli("run", "hf:gpt2", "--size", "tiny", "--device", "cpu", "--mode", "generate",
               "--prompt-len", "8", "--new-tokens", "3", "--steps", "1", "--warmup", "0",
               "--quiet", "-o", str(out))
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    assert case["status"] == "ok" and case["generation"]["new_tokens"] == 3
    # GPT-2 small: 12 layers x 12 heads x 64 dims, K and V, 11 positions, fp32
    assert case["generation"]["kv_cache_bytes"] == 2 * 12 * 1 * 11 * 12 * 64 * 4


def test_the_last_level_cache_is_read_from_sysfs(tmp_path: Path) -> None:
    from accelbench.devices.cpuinfo import last_level_cache_bytes

    for index, size in (("index0", "48K"), ("index2", "2048K"), ("index3", "32M")):
        (tmp_path / index).mkdir()
        (tmp_path / index / "size").write_text(size + "\n")
    assert last_level_cache_bytes(tmp_path) == 32 * 1024**2
    assert last_level_cache_bytes(tmp_path / "missing") is None


def test_decode_bandwidth_is_held_against_the_roofline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above the measured bandwidth is a measurement error unless the bytes fit in the last-level
    cache; without a measured roofline the case measures a device copy once for the process and
    says so (issue 33: every row has its floor)."""
    from types import SimpleNamespace

    from accelbench.engine import measure_case
    from accelbench.measure.ceilings import roofline

    cpu = DeviceSet.current().select("cpu")[0]
    figures = SimpleNamespace(effective_bandwidth_bytes_per_s=30e9, bytes_per_step=10**6,
                              tpot_s=10**6 / 30e9)
    monkeypatch.setattr(roofline, "cached_bandwidth", lambda device: None)
    monkeypatch.setitem(measure_case._MEASURED_HERE, cpu.name, 5e9)
    unmeasured = measure_case._decode_against_bandwidth(cpu, figures)
    assert unmeasured["bandwidth_reference_bytes_per_s"] == 5e9
    assert "measured for this run" in unmeasured["bandwidth_reference_source"]
    monkeypatch.setattr(roofline, "cached_bandwidth", lambda device: 10e9)
    judged = measure_case._decode_against_bandwidth(cpu, figures)
    assert judged["bandwidth_share"] == pytest.approx(3.0)
    fits = (judged["last_level_cache_bytes"] or 0) >= 10**6
    assert ("last-level cache" if fits else "measurement error") in judged["bandwidth_verdict"]
    big = SimpleNamespace(effective_bandwidth_bytes_per_s=30e9, bytes_per_step=10**12, tpot_s=10**12 / 30e9)
    assert "measurement error" in measure_case._decode_against_bandwidth(cpu, big)["bandwidth_verdict"]
