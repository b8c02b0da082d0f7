"""Generation: the figures measure/generation/rounds.py records (per device timing path), what a decode
step reads, decode against the measured bandwidth, and check --mode generate's verdicts."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import pytest
import torch
from fakes import FakeAsyncAdapter, SyncLog
from torch import nn

from accelbench.devices import Device, DeviceSet
from accelbench.devices.numerics import get_precision
from accelbench.errors import UsageError
from accelbench.measure.generation import rounds as gen
from accelbench.measure.generation.decode_bytes import (
    CACHE_RESIDENT,
    MEASUREMENT_ERROR,
    WITHIN,
    judge_bandwidth,
    weights_read_by,
)
from accelbench.parity.generation import judge_generation, run_generation_check, tolerance_for
from accelbench.results.generation import TokenParity
from accelbench.workloads import get_workload_class
from accelbench.workloads.builtin.decoder import Decoder, greedy_generate
from accelbench.workloads.builtin.language_model import DecoderLM

DECODERS = ("nanogpt-char", "gpt2", "llama-1b")


#: Decoder steps are small: torch's two intra-op threads would wait on each other (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")


def cpu() -> Device:
    return DeviceSet.current().select("cpu")[0]


def tiny(name: str = "nanogpt-char", std: float | None = 0.5, seed: int = 0) -> tuple[DecoderLM, Decoder]:
    """A tiny decoder in eval mode; ``std`` widens its matrices so that its greedy tokens vary
    (at the training init the tied head mostly echoes the last token)."""
    workload = get_workload_class(name)("tiny")
    assert isinstance(workload, DecoderLM)
    torch.manual_seed(seed)
    model = workload.build_model()
    if std is not None:
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.dim() >= 2:
                    parameter.normal_(0.0, std)
    assert isinstance(model, Decoder)
    return workload, model.eval()


# --- the figures on the CPU -----------------------------------------------------------------------
def test_cpu_figures_are_consistent_and_count_what_they_say() -> None:
    workload, model = tiny()
    batch, prompt, new = 2, 8, 10
    figures = gen.measure_generation(workload, model, cpu(), batch_size=batch, prompt_len=prompt,
                                     new_tokens=new, rounds=3)
    assert figures.timing_method == gen.HOST and figures.window_tokens is None
    assert len(figures.rounds) == 3 and figures.decode_steps == new - 1
    for round_ in figures.rounds:
        assert len(round_.token_times_s) == new - 1  # the first token comes from the prefill
        assert 0 < sum(round_.token_times_s) <= round_.decode_s
        assert sum(round_.token_times_s) == pytest.approx(round_.decode_s, rel=0.2, abs=1e-3)
        assert 0 < round_.ttft_s < round_.ttft_s + round_.decode_s
    pooled = [t for r in figures.rounds for t in r.token_times_s]
    assert figures.itl_median_s == statistics.median(pooled)
    # 27 gaps are too few for a 99th percentile (issue 33): the figure is their maximum, and says so.
    assert figures.itl_p99_s == max(pooled) and figures.tail_statistics["itl_p99_s"] == "max of 27"
    assert figures.ttft_s == statistics.median(r.ttft_s for r in figures.rounds)
    assert figures.prefill_tokens_per_s == pytest.approx(batch * prompt / figures.ttft_s)
    assert figures.decode_tokens_per_s == pytest.approx(
        1 / statistics.median(r.decode_s / (new - 1) for r in figures.rounds))
    assert figures.decode_tokens_per_s_total == pytest.approx(batch * figures.decode_tokens_per_s)
    # Bytes: keys and values (2) x layers x batch x kv heads x head_dim x 4 bytes, per position.
    config = workload.preset.model
    per_position = 2 * config.layers * batch * config.kv_heads * config.head_dim * 4
    assert figures.kv_cache_bytes == per_position * (prompt + new)
    assert figures.cache_bytes_per_step == per_position * (prompt + new / 2)
    every = sum(p.numel() * 4 for p in model.parameters())
    assert figures.weight_bytes_per_step == every - model.positions.weight.numel() * 4  # rows only
    assert figures.effective_bandwidth_bytes_per_s == pytest.approx(
        figures.bytes_per_step * figures.decode_tokens_per_s)
    assert figures.peak_memory_bytes and figures.peak_memory_bytes > 0
    again = gen.GenerationFigures.from_dict(figures.to_dict())
    assert again == figures and again.to_dict() == figures.to_dict()


@pytest.mark.parametrize("name", DECODERS)
def test_tokens_are_the_plain_greedy_loops(name: str) -> None:
    workload, model = tiny(name)
    prompt = workload.make_prompt(2, 6, seed=3)
    tokens, round_ = gen.greedy_round(workload, model, prompt, 9, gen.clock_maker(cpu(), 8)())
    expected = greedy_generate(model, prompt, 9)
    assert tokens.shape == (2, 9)  # exactly N new tokens, whatever they are
    assert torch.equal(tokens, expected)
    assert len(set(expected.flatten().tolist())) > 2  # tokens vary: a broken cache would show
    assert len(round_.token_times_s) == 8


def test_one_new_token_has_no_decode_figures() -> None:
    workload, model = tiny()
    figures = gen.measure_generation(workload, model, cpu(), prompt_len=4, new_tokens=1, rounds=1)
    assert figures.decode_steps == 0 and figures.rounds[0].token_times_s == ()
    assert figures.decode_tokens_per_s is None and figures.itl_median_s is None
    assert figures.effective_bandwidth_bytes_per_s is None and figures.ttft_s > 0


@pytest.mark.parametrize(("prompt", "new", "message"), [
    (0, 4, "--prompt-len must be at least 1, not 0"),
    (4, 0, "--new-tokens must be at least 1, not 0"),
    (30, 3, "a prompt of 30 and 3 new tokens need 33 positions; this model's context holds 32"),
])
def test_bad_lengths_are_one_line_usage_errors(prompt: int, new: int, message: str) -> None:
    workload, model = tiny()
    with pytest.raises(UsageError) as raised:
        gen.measure_generation(workload, model, cpu(), prompt_len=prompt, new_tokens=new)
    assert str(raised.value) == message


# --- asynchronous devices -------------------------------------------------------------------------
class HostEvent:
    """A timing event stamped by the host clock when recorded."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.at: float | None = None

    def record(self) -> None:
        self.at = time.perf_counter()
        self.log.append("record")

    def elapsed_time(self, end: HostEvent) -> float:
        assert self.at is not None and end.at is not None
        return (end.at - self.at) * 1000.0


class EventAdapter(SyncLog, FakeAsyncAdapter):
    """An accelerator whose events are safe per step (CUDA's way)."""

    def timing_event(self, index: int) -> HostEvent:
        return HostEvent(self.log)


class UnsafeEventAdapter(EventAdapter):
    """MPS's way: events exist but are not safe around every step."""

    step_events_safe = False

    def timing_event(self, index: int) -> HostEvent:
        raise AssertionError("an event was made on a device whose events are not safe per step")


def test_events_per_token_and_no_host_sync_per_token() -> None:
    workload, model = tiny()
    adapter = EventAdapter()
    device = Device(adapter, "fake")
    new = 12
    figures = gen.measure_generation(workload, model, device, prompt_len=6, new_tokens=new, rounds=2,
                                     warmup_rounds=0)
    assert figures.timing_method == gen.EVENTS
    # Per round: its N events recorded once as they are made, before its clock starts (torch
    # creates a device event at its first record), a sync at the start, one when the first token
    # is ready, one at the end; the events between them are the N - 1 decode steps plus the first
    # token's. (Before the rounds: the event factory's trial records.)
    rounds = "".join("S" if e == "sync" else "r" for e in adapter.log)
    assert rounds.endswith(("r" * new + "SS" + "r" * new + "S") * 2), rounds
    for round_ in figures.rounds:
        assert len(round_.token_times_s) == new - 1
        assert sum(round_.token_times_s) == pytest.approx(round_.decode_s)
    assert figures.itl_median_s is not None and figures.itl_p99_s is not None


def test_events_that_fail_to_read_fall_back_to_the_host_and_say_so() -> None:
    class Broken(HostEvent):
        def elapsed_time(self, end: HostEvent) -> float:
            raise RuntimeError("End event 6 was not recorded after start event 5")

    class BrokenAdapter(EventAdapter):
        def timing_event(self, index: int) -> HostEvent:
            return Broken(self.log)

    workload, model = tiny()
    figures = gen.measure_generation(workload, model, Device(BrokenAdapter(), "fake"), prompt_len=6,
                                     new_tokens=5, rounds=2, warmup_rounds=0)
    assert figures.timing_method.startswith(gen.EVENTS_FAILED)
    assert "End event 6 was not recorded" in figures.timing_method
    assert all(r.decode_s > 0 and r.token_times_s == () for r in figures.rounds)
    assert figures.itl_median_s is None and figures.decode_tokens_per_s is not None


def test_mps_like_device_times_windows_with_one_sync_each_and_no_percentiles() -> None:
    workload, model = tiny()
    adapter = UnsafeEventAdapter()
    new, window = 12, 4  # 11 decode steps: windows of 4, 4 and 3
    figures = gen.measure_generation(workload, model, Device(adapter, "fake"), prompt_len=6, new_tokens=new,
                                     rounds=2, warmup_rounds=1, window_tokens=window)
    assert figures.timing_method == gen.WINDOWS.format(window=window)
    assert "no per-token percentiles" in figures.timing_method and figures.window_tokens == window
    assert figures.itl_median_s is None and figures.itl_p99_s is None
    for round_ in figures.rounds:
        assert round_.token_times_s == () and [n for n, _ in round_.windows] == [4, 4, 3]
        assert round_.decode_s == sum(s for _, s in round_.windows)
    tpot = statistics.median(r.decode_s / 11 for r in figures.rounds)
    assert figures.decode_tokens_per_s == pytest.approx(1 / tpot)
    # Per round (warm-up included): start, first token, one per window.
    assert adapter.log == ["sync"] * (3 * (2 + 3))


def test_on_the_mps_personality_generation_records_no_event(personality) -> None:
    workload, model = tiny()
    with personality("mps") as journal:
        device = DeviceSet.current().select("mps")[0]
        figures = gen.measure_generation(workload, model.to(device.torch_device), device, prompt_len=6,
                                         new_tokens=6, rounds=1, window_tokens=2)
    assert figures.timing_method == gen.WINDOWS.format(window=2)
    assert journal.event_records(under="accelbench/measure/") == []
    assert figures.weight_bytes_per_step == sum(p.numel() * 4 for p in model.parameters()) - 32 * 32 * 4


# --- bytes and bandwidth --------------------------------------------------------------------------
def test_weights_read_leave_out_row_lookups_and_count_a_tie_once() -> None:
    class Untied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(50, 8)
            self.head = nn.Linear(8, 50, bias=False)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.embed(ids))

    untied = Untied()
    ids = torch.tensor([3])
    assert weights_read_by(lambda: untied(ids), untied) == 50 * 8 * 4  # the head only
    untied.head.weight = untied.embed.weight  # tied: one matrix, read in full by the head
    assert weights_read_by(lambda: untied(ids), untied) == 50 * 8 * 4
    workload, model = tiny("llama-1b")  # no position table: every parameter
    cache = model.new_cache(4)
    token = model.prefill(torch.tensor([[1, 2]]), cache).argmax(dim=-1)
    assert weights_read_by(lambda: model.decode(token, cache), model) == \
        sum(p.numel() * 4 for p in model.parameters())


def test_decode_bandwidth_beyond_the_measured_one_is_flagged_unless_it_fits_in_cache() -> None:
    assert judge_bandwidth(80e9, 100e9, bytes_per_step=10**9) == judge_bandwidth(80e9, 100e9, 10**9, 2**25)
    within = judge_bandwidth(80e9, 100e9, bytes_per_step=10**9)
    assert (within.share, within.verdict, within.flagged) == (pytest.approx(0.8), WITHIN, False)
    beyond = judge_bandwidth(120e9, 100e9, bytes_per_step=10**9, last_level_cache_bytes=2**25)
    assert (beyond.share, beyond.verdict, beyond.flagged) == (pytest.approx(1.2), MEASUREMENT_ERROR, True)
    cached = judge_bandwidth(120e9, 100e9, bytes_per_step=2**20, last_level_cache_bytes=2**25)
    assert (cached.verdict, cached.flagged) == (CACHE_RESIDENT, False)
    # No cache size known (MPS): "above", with why it can be, never an error
    # (tests/measure/test_decode_reads.py).
    assert not judge_bandwidth(120e9, 100e9, bytes_per_step=2**20).flagged


# --- check --mode generate ------------------------------------------------------------------------
def planted(vocab: int = 5, steps: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(1, steps, vocab, generator=generator, dtype=torch.float64) * 3
    return logits.argmax(dim=-1), logits


def test_the_verdict_over_tensors() -> None:
    tokens, logits = planted()
    same = judge_generation(tokens, logits, tokens.clone(), logits.float().double(), "bf16")
    assert same.verdict == "pass" and same.position is None and same.max_logit_diff < 1e-6
    # A near tie at position 2: the reference's two best within a hair, the candidate takes the other.
    tied = logits.clone()
    best = int(tokens[0, 2])
    other = (best + 1) % 5
    tied[0, 2, other] = tied[0, 2, best] - 1e-3
    cand_logits = tied.clone()
    cand_logits[0, 2, other] += 2e-3
    cand_tokens = tokens.clone()
    cand_tokens[0, 2] = other
    cand_tokens[0, 3] = (int(tokens[0, 3]) + 2) % 5  # after the first difference: not compared
    drift = judge_generation(tokens, tied, cand_tokens, cand_logits, "bf16")
    assert (drift.verdict, drift.position, drift.reference_token, drift.candidate_token) == \
        ("drift", 2, best, other)
    assert drift.reference_gap == pytest.approx(1e-3) and drift.reference_gap < drift.tie_tolerance
    # The same swap where the reference had a clear winner: diverged.
    clear = logits.clone()
    clear[0, 2, other] = clear[0, 2, best] - 5.0
    wrong = clear.clone()
    wrong[0, 2, other] += 10.0
    diverged = judge_generation(tokens, clear, cand_tokens, wrong, "bf16")
    assert (diverged.verdict, diverged.position) == ("diverged", 2)
    assert "not a tie" in diverged.message and diverged.max_logit_diff_position == 2
    # The same tokens with logits far off: diverged where they first left the drift tolerance.
    far = logits.clone()
    far[0, 1] *= 2
    assert judge_generation(tokens, logits, tokens, far, "bf16").position == 1
    assert judge_generation(tokens, logits, tokens, far, "bf16").verdict == "diverged"
    nan = logits.clone()
    nan[0, 3, 0] = math.nan
    assert (judge_generation(tokens, logits, tokens, nan, "bf16").verdict,
            judge_generation(tokens, logits, tokens, nan, "bf16").position) == ("non-finite", 3)
    again = TokenParity.from_dict(drift.to_dict())
    assert again == drift


def bf16() -> Any:
    return get_precision("bf16")


def test_check_passes_in_bf16_against_fp64_on_the_cpu() -> None:
    workload = get_workload_class("nanogpt-char")("tiny")
    result = run_generation_check(workload, workload.build_model, cpu(), bf16(), batch_size=2,
                                  prompt_len=8, new_tokens=16)
    assert result.verdict == "pass", result.message
    assert 0 < result.max_logit_diff <= tolerance_for("bf16").passed


def test_check_calls_a_planted_near_tie_drift() -> None:
    """Two token rows that bf16 cannot tell apart (one is the other times 1 + 1e-5, its entries
    exact in bf16): in fp64 the second wins by a hair wherever the first leads, in bf16 they tie
    and argmax takes the first."""
    workload = get_workload_class("nanogpt-char")("tiny")

    def build() -> nn.Module:
        model = workload.build_model()
        with torch.no_grad():
            row = (model.tokens.weight[7] * 4).bfloat16().float()
            model.tokens.weight[7] = row
            model.tokens.weight[9] = row.double().mul(1 + 1e-5).float()
        return model

    result = run_generation_check(workload, build, cpu(), bf16(), prompt_len=8, new_tokens=16)
    assert (result.verdict, result.reference_token, result.candidate_token) == ("drift", 9, 7), result.message
    assert result.reference_gap is not None and result.tie_tolerance is not None
    assert 0 < result.reference_gap < 1e-3 < result.tie_tolerance


def test_check_fails_a_planted_fault() -> None:
    workload = get_workload_class("nanogpt-char")("tiny")

    def fault(candidate: nn.Module) -> None:
        with torch.no_grad():
            candidate.blocks[1].mlp.down.weight.mul_(-40)

    result = run_generation_check(workload, workload.build_model, cpu(), bf16(), prompt_len=8,
                                  new_tokens=16, plant=fault)
    assert result.verdict == "diverged", result.message
    assert result.position is not None


def test_a_candidate_that_raises_is_a_failed_verdict() -> None:
    workload = get_workload_class("nanogpt-char")("tiny")

    def fault(candidate: nn.Module) -> None:
        candidate.blocks[0].mlp.up.weight.data = torch.zeros(3, 3, dtype=torch.bfloat16)

    result = run_generation_check(workload, workload.build_model, cpu(), bf16(), prompt_len=4, new_tokens=2,
                                  plant=fault)
    assert result.verdict == "failed" and "RuntimeError" in result.error


def test_on_the_ampere_personality_decode_is_timed_by_events_without_a_sync_per_token(personality) -> None:
    workload, model = tiny()
    new = 9
    with personality("ampere") as journal:
        device = DeviceSet.current().select("cuda:0")[0]
        figures = gen.measure_generation(workload, model.to(device.torch_device), device, prompt_len=6,
                                         new_tokens=new, rounds=2, warmup_rounds=1)
    assert figures.timing_method == gen.EVENTS
    assert all(len(r.token_times_s) == new - 1 for r in figures.rounds)
    # One event per token and round (warm-up included) in the loop, each recorded once more as the
    # round's clock is made (torch creates it then, outside the round), and the factory's trial
    # pair and re-record probe (three records) before it.
    clocks = r"accelbench/measure/generation/generation_clocks\.py"
    assert len(journal.event_records(under=clocks + r":\d+ in step$")) == 3 * new
    assert journal.event_creations(under=clocks + r":\d+ in step$") == []
    assert len(journal.event_records(under=clocks)) == 6 * new + 5


def test_check_on_the_mps_personality_keeps_float64_on_the_cpu(personality) -> None:
    """MPS has no float64: the reference stays on the CPU and the candidate's logits are copied
    to the CPU before they are widened."""
    workload = get_workload_class("nanogpt-char")("tiny")
    with personality("mps"):
        device = DeviceSet.current().select("mps")[0]
        result = run_generation_check(workload, workload.build_model, device, bf16(), batch_size=2,
                                      prompt_len=8, new_tokens=16)
    assert result.verdict == "pass", result.message
