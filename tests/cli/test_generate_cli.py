"""Issue 26, items 6, 7 and 15: generation's lengths, flags, reference and compilation.

- 7: the default prompt and new tokens fit every model's context (``run``/``check --mode generate
  --size tiny`` once asked for "a prompt of -96 tokens"); ``--prompt-len``/``--new-tokens`` where
  no generation case runs are refused in one place (run, check, sweep, the Python API).
- 15: ``--compile`` with ``--mode generate`` runs compiled graphs in the timed decode steps (the
  built-in decoders' prefill/decode resolved to the original module's eager methods); a workload
  whose generation never calls the compiled model is refused, not timed as compiled.
- 6: ``check --mode generate`` compiles the candidate where the case says so and honours
  ``--reference cpu`` (float32), which it ignored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import accelbench
from accelbench.devices import DeviceSet
from accelbench.devices.numerics import get_precision
from accelbench.engine.case import plan
from accelbench.engine.measure_case import run_case
from accelbench.errors import UsageError
from accelbench.measure.generation.recipe import compile_for_generation
from accelbench.measure.generation.rounds import measure_generation
from accelbench.options import RunOptions
from accelbench.options.values import build_run_options
from accelbench.parity.generation import run_generation_check
from accelbench.workloads.builtin.nanogpt_char import NanoGPTChar
from accelbench.workloads.catalogue import get_workload_class
from accelbench.workloads.presets import DEFAULT_NEW_TOKENS, DEFAULT_PROMPT_LEN

COUNTING = "accelbench-test-counting"


class CountingBackend:
    """A torch.compile back end that runs each captured graph as it is (no code generation, so
    the test takes no compiler time) and counts the calls of each graph."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, graph: torch.fx.GraphModule, inputs: Any) -> Callable[..., Any]:
        index = len(self.calls)
        self.calls.append(0)

        def run(*args: Any) -> Any:
            self.calls[index] += 1
            return graph.forward(*args)
        return run


BACKEND = CountingBackend()
torch._dynamo.register_backend(BACKEND, name=COUNTING)


@pytest.fixture
def counting() -> Iterator[CountingBackend]:
    """The registered counting back end, its counts cleared and dynamo's caches empty (so each
    test compiles afresh and no earlier test's graphs count towards the recompile limit)."""
    torch._dynamo.reset()
    BACKEND.calls.clear()
    yield BACKEND
    torch._dynamo.reset()


def cpu() -> Any:
    return DeviceSet.current().select("cpu")[0]


# --- item 15: compiled generation runs compiled graphs -------------------------------------------
def test_compiled_generation_times_the_compiled_graph_in_every_decode_step(
        counting: CountingBackend) -> None:
    """Item 15: before, the Decoder's prefill/decode were reached through the compiled module's
    attribute forwarding (the original's eager methods): no graph was ever called. Now every
    prefill and every decode step of the warm-up and timed rounds calls a compiled graph: one
    graph for the prefill, one for every decode position."""
    options = build_run_options("nanogpt-char", "cpu", "generate", size="tiny", prompt_len=6,
                                new_tokens=5, steps=2, warmup=1, compile=COUNTING,
                                isolation="none")
    (case,) = plan(options, DeviceSet.current())
    result = run_case(case, options)
    assert result.ok, result.error
    assert result.compile_backend == COUNTING
    rounds = 1 + 2  # warm-up and timed
    assert sorted(counting.calls) == [rounds, rounds * 4]  # prefill; 4 decode steps a round
    assert len(result.step_times) == 2 * 4


def test_compiled_generation_gives_the_eager_tokens(counting: CountingBackend) -> None:
    """The compiled path writes the cache as the eager one does (its in-place writes, through
    AOTAutograd's functionalisation as inductor's, reach the cache object), so the greedy tokens
    are the same: Llama's layout (rotary positions, grouped key/value heads)."""
    from accelbench.workloads.builtin.decoder import greedy_generate

    workload = get_workload_class("llama-1b")("tiny")
    torch.manual_seed(0)
    model = workload.build_model().eval()
    prompt = workload.make_prompt(2, 5, seed=1)
    eager = greedy_generate(model, prompt, 4)
    compiled, confirm = compile_for_generation(model, "aot_eager", "llama-1b")
    assert torch.equal(greedy_generate(compiled, prompt, 4), eager)
    confirm()


class MethodCallingDecoder(NanoGPTChar):
    """A decoder whose generation calls the model's methods, as the built-in ones once did: on a
    compiled module they are the original module's, uncompiled."""

    name = "method-calling-decoder"

    def prefill(self, model: torch.nn.Module, prompt: torch.Tensor, max_len: int) -> Any:
        cache = model.new_cache(max_len)
        return model.prefill(prompt, cache), cache

    def decode_step(self, model: torch.nn.Module, tokens: torch.Tensor, cache: Any) -> Any:
        return model.decode(tokens, cache), cache


def test_a_workload_whose_generation_never_calls_the_compiled_model_is_refused(
        counting: CountingBackend) -> None:
    """Item 15: eager timings are never labelled compiled: the check after the rounds raises
    NotImplementedError (the case's status: unsupported) naming what to change."""
    workload = MethodCallingDecoder("tiny")
    compiled, confirm = compile_for_generation(workload.build_model().eval(), COUNTING,
                                               workload.name)
    with torch.no_grad():
        measure_generation(workload, compiled, cpu(), prompt_len=4, new_tokens=3, rounds=1,
                           warmup_rounds=0)
    assert counting.calls == []
    with pytest.raises(NotImplementedError, match="never call the model.*call model"):
        confirm()


def test_hf_generation_compiled_runs_its_graphs(tiny_hf_llama: str, counting: CountingBackend) -> None:
    """Item 15 for hf: models: their prefill and decode_step call the model, so a compiled one
    runs graphs in every step (transformers' growing cache may take more than one decode graph)."""
    workload = get_workload_class(tiny_hf_llama)("tiny")
    compiled, confirm = compile_for_generation(workload.build_model().eval(), COUNTING, "hf")
    with torch.no_grad():
        measure_generation(workload, compiled, cpu(), prompt_len=4, new_tokens=3, rounds=1,
                           warmup_rounds=0)
    confirm()
    assert sum(counting.calls) >= 3  # the prefill and both decode steps, each through a graph


# --- item 6: check --mode generate compiles the candidate and honours --reference -------------------
def test_check_generate_compiles_the_candidate(inline_cli, tmp_path: Path,
                                               counting: CountingBackend) -> None:
    """Item 6: ``check --mode generate --compile B`` recorded compile_backend B but decoded an
    eager candidate; now the candidate's prefill and every decode step run B's graphs."""
    out = tmp_path / "check.json"
    done = inline_cli("check", "nanogpt-char", "--size", "tiny", "--device", "cpu", "--mode",
                      "generate", "--prompt-len", "6", "--new-tokens", "4", "--compile", COUNTING,
                      "--isolation", "none", "--quiet", "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    assert case["compile_backend"] == COUNTING
    assert case["generation"]["parity"]["verdict"] == "pass"
    assert sorted(counting.calls) == [1, 3]  # one prefill, three decode steps


def test_check_generate_honours_reference_cpu(inline_cli, tmp_path: Path) -> None:
    """Item 6: ``--reference cpu`` was ignored (the reference was float64 whatever it said). An
    fp32 candidate on the CPU against an fp32 CPU reference computes the same numbers: no logit
    differs; against float64 rounding shows."""
    workload = get_workload_class("nanogpt-char")("tiny")
    fp32 = get_precision("fp32")
    same = run_generation_check(workload, workload.build_model, cpu(), fp32,  # type: ignore[arg-type]
                                prompt_len=6, new_tokens=4, reference="cpu")
    wider = run_generation_check(workload, workload.build_model, cpu(), fp32,  # type: ignore[arg-type]
                                 prompt_len=6, new_tokens=4)
    assert (same.reference, same.verdict, same.max_logit_diff) == ("cpu", "pass", 0.0)
    assert (wider.reference, wider.verdict) == ("cpu-fp64", "pass") and wider.max_logit_diff > 0
    out = tmp_path / "check.json"
    done = inline_cli("check", "nanogpt-char", "--size", "tiny", "--device", "cpu", "--mode",
                      "generate", "--prompt-len", "6", "--new-tokens", "4", "--reference", "cpu",
                      "--isolation", "none", "--quiet", "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    assert record["options"]["reference"] == "cpu"
    parity = record["cases"][0]["generation"]["parity"]
    assert (parity["reference"], parity["max_logit_diff"]) == ("cpu", 0.0)
    # Issue 36: the table's title says what a generation check checked (not "50 training
    # steps"), and the verdict is said once, in its cell (the detail was "pass: the same ...").
    from conftest import rendered_text

    from accelbench.render.check_table import check_table
    from accelbench.results import RunRecord

    shown = rendered_text(check_table(RunRecord.from_dict(record)))
    title, row = shown.splitlines()[0], shown.splitlines()[-1]
    assert "4 tokens greedy after a 6-token prompt" in title and "training steps" not in title
    assert row.split().count("pass") == 1 and "pass:" not in row


# --- item 7: default lengths fit; idle length flags are refused ------------------------------------
@pytest.mark.parametrize("context", [2, 3, 32, 64, 128, 256, 1024, 131_072])
def test_the_default_lengths_fit_every_context(context: int) -> None:
    """Item 7: new tokens 128, or half the context where less; prompt 512, or the context minus
    the new tokens where less: both at least 1, together within the context."""
    ((prompt, new),) = RunOptions().generation_lengths("m", context)
    assert prompt >= 1 and new >= 1 and prompt + new <= context
    assert new == min(DEFAULT_NEW_TOKENS, context // 2)
    assert prompt == min(DEFAULT_PROMPT_LEN, context - new)
    if context >= 1024:
        assert (prompt, new) == (512, 128)  # the published defaults, unchanged
    # Given new tokens stand as given; the default prompt fits around them.
    assert RunOptions(new_tokens=(1,)).generation_lengths("m", context) == [
        (min(DEFAULT_PROMPT_LEN, context - 1), 1)]


def test_lengths_that_cannot_fit_name_the_values_and_the_context() -> None:
    with pytest.raises(UsageError, match="do not fit the 1-token context of 'm'"):
        RunOptions().generation_lengths("m", 1)
    with pytest.raises(UsageError, match="--prompt-len 40 and 16 new tokens \\(the default\\) do "
                       "not fit the 32-token context of 'm'; allowed: .* at most 32"):
        RunOptions(prompt_lens=(40,)).generation_lengths("m", 32)


@pytest.mark.parametrize("command", ["run", "check"])
def test_generate_at_tiny_size_runs_with_the_default_lengths(inline_cli, tmp_path: Path,
                                                             command: str) -> None:
    """Item 7: ``run``/``check nanogpt-char --mode generate --size tiny`` with no lengths failed
    with "a prompt of -96 tokens" (128 new tokens in a 32-token context); now 16 + 16."""
    out = tmp_path / "out.json"
    extra = ["--steps", "1", "--warmup", "0"] if command == "run" else []
    done = inline_cli(command, "nanogpt-char", "--mode", "generate", "--size", "tiny", "--device",
                      "cpu", "--isolation", "none", "--quiet", "-o", str(out), *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    assert (case["status"], case["prompt_len"], case["new_tokens"]) == ("ok", 16, 16)


@pytest.mark.parametrize(("argv", "keywords"), [
    (["run", "nanogpt-char", "--mode", "train", "--prompt-len", "8"],
     {"modes": "train", "prompt_len": 8}),
    (["run", "nanogpt-char", "--mode", "eval", "--new-tokens", "8"],
     {"modes": "eval", "new_tokens": 8}),
    (["check", "nanogpt-char", "--mode", "train", "--prompt-len", "8", "--new-tokens", "4"],
     {"modes": "train", "prompt_len": 8, "new_tokens": 4}),
    (["sweep", "nanogpt-char", "--batch-size", "1,2", "--new-tokens", "8"],
     {"modes": "train", "new_tokens": 8}),
])
def test_length_flags_without_a_generation_case_are_refused(inline_cli, argv: list[str],
                                                            keywords: dict[str, Any]) -> None:
    """Item 7: ``run --mode train --prompt-len 8`` ran and ignored the flag (sweep refused it).
    Every command and the Python API refuse it in one line, exit 2, in the same words."""
    done = inline_cli(*argv, "--device", "cpu", "--size", "tiny")
    assert done.returncode == 2, done.stdout
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "with --mode generate" in line
    assert "makes no generation case" in line
    with pytest.raises(UsageError) as raised:
        accelbench.run("nanogpt-char", device="cpu", size="tiny", **keywords)
    assert line == f"accelbench: error: {raised.value}"


def test_length_flags_stand_where_a_suite_generates() -> None:
    """The quick suite generates with nanogpt-char wherever it runs eval: --new-tokens applies."""
    options = build_run_options(None, "cpu", "train,eval", suite="quick", new_tokens=8)
    assert options.new_tokens == (8,)
    with pytest.raises(UsageError, match="--new-tokens goes with --mode generate"):
        build_run_options(None, "cpu", "train", suite="quick", new_tokens=8)
