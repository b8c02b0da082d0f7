"""Issue 28 item 1-2: ``--protocol`` (llama-bench, gpt-fast, mlperf-client) shapes generation cases
and reports their figures as each peer defines them; the protocol is a field of the
comparability key; MLPerf Inference's interactive budget is judged where a Llama-3.1-8B shape
ran. Figures are computed here on rounds the test controls, never on a clock."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from accelbench.errors import UsageError
from accelbench.measure.generation.protocols import (
    INTERACTIVE_TPOT_S,
    LLAMA_3_1_8B,
    interactive_budget,
    protocol_figures,
)
from accelbench.measure.generation.rounds import GenerationFigures, GenerationRound
from accelbench.options import RunOptions
from accelbench.options.values import build_run_options
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import case_figures
from accelbench.results.generation import Generation
from accelbench.results.key import (
    KEY_DEFAULTS,
    comparability_key,
    config_label,
    incomparable_reasons,
    key_json,
)
from accelbench.results.protocol_summary import geometric_mean, mlperf_client_overall
from accelbench.workloads.protocols import fitted_tests, protocol, protocol_test_for


def _figures(prompt: int, new: int, ttfts: list[float], decodes: list[float],
             batch: int = 1) -> GenerationFigures:
    rounds = tuple(GenerationRound(t, d) for t, d in zip(ttfts, decodes, strict=True))
    return GenerationFigures(batch_size=batch, prompt_len=prompt, new_tokens=new, timing_method="host",
                             rounds=rounds, warmup_rounds=1, kv_cache_bytes=1,
                             weight_bytes_per_step=1_000_000, cache_bytes_per_step=10)


def test_the_protocols_are_the_peers_shapes_where_they_fit() -> None:
    assert [(t.name, t.prompt_len, t.new_tokens) for t in fitted_tests("llama-bench", 131_072)] == [
        ("pp512", 512, 1), ("tg128", 1, 128)]
    assert [(t.prompt_len, t.new_tokens) for t in fitted_tests("gpt-fast", 1024)] == [(6, 200)]
    assert [t.name for t in fitted_tests("mlperf-client", 8192)] == [
        "content generation", "creative writing", "structured text", "code analysis",
        "summarisation, intermediate"]
    assert (protocol("llama-bench").rounds, protocol("gpt-fast").rounds,
            protocol("mlperf-client").rounds) == (5, 5, 3)
    with pytest.raises(UsageError, match="allowed: llama-bench, gpt-fast, mlperf-client"):
        protocol("mlperf")


def test_a_tiny_context_scales_each_test_down_and_says_so() -> None:
    """Issue 28 item 1: never silently: a scaled test is named for what it ran and labelled."""
    pp, tg = fitted_tests("llama-bench", 64)
    assert (pp.name, pp.prompt_len, pp.new_tokens, pp.scaled_from) == ("pp63", 63, 1, "pp512")
    assert (tg.name, tg.prompt_len, tg.new_tokens, tg.scaled_from) == ("tg63", 1, 63, "tg128")
    assert pp.label == "pp63 (pp512 scaled to fit the model's context)"
    for test in fitted_tests("mlperf-client", 64):
        assert test.prompt_len + test.new_tokens <= 64 and test.new_tokens >= 2  # a 2nd+ rate needs 2
        assert test.scaled_from == test.name
    (gpt_fast,) = fitted_tests("gpt-fast", 128)
    assert gpt_fast.prompt_len + gpt_fast.new_tokens <= 128 and gpt_fast.scaled_from == "gpt-fast"
    assert protocol_test_for("llama-bench", 64, 1, 63) == tg
    assert protocol_test_for("llama-bench", 64, 8, 8) is None


def test_protocol_options_make_the_protocols_cases_and_refuse_what_it_sets() -> None:
    options = build_run_options("gpt2", "cpu", "generate", protocol="llama-bench", size="tiny")
    assert options.protocol == "llama-bench"
    assert options.generation_lengths("gpt2", 64) == [(63, 1), (1, 63)]
    for keywords, flag in (({"prompt_len": 8}, "--prompt-len"), ({"batch_size": 2}, "--batch-size")):
        with pytest.raises(UsageError, match=f"leave out {flag}"):
            build_run_options("gpt2", "cpu", "generate", protocol="gpt-fast", **keywords)
    with pytest.raises(UsageError, match="--protocol llama-bench goes with --mode generate only"):
        build_run_options("gpt2", "cpu", "train,generate", protocol="llama-bench")
    with pytest.raises(UsageError, match="--protocol 'nope' is unknown"):
        RunOptions(workloads=("gpt2",), modes=("generate",), protocol="nope")
    assert RunOptions.from_dict(options.to_dict()) == options


def test_the_protocol_is_a_key_field_left_out_of_old_keys() -> None:
    """Issue 28: a protocol's row is never compared with accelbench's own at the same lengths, and
    a key stored before the field existed is unchanged."""
    assert KEY_DEFAULTS["protocol"] == ""
    plain = CaseResult(workload="gpt2", mode="generate", device="cpu", batch_size=1, prompt_len=63,
                       new_tokens=1, size="tiny")
    run = CaseResult(workload="gpt2", mode="generate", device="cpu", batch_size=1, prompt_len=63,
                     new_tokens=1, size="tiny", protocol="llama-bench")
    assert incomparable_reasons(plain, run) == ["protocol none vs llama-bench"]
    assert "protocol" not in json.loads(key_json(plain))
    assert json.loads(key_json(run))["protocol"] == "llama-bench"
    assert comparability_key(plain) != comparability_key(run)
    assert "protocol:llama-bench" in config_label(run) and "protocol" not in config_label(plain)
    assert CaseResult.from_dict(run.to_dict()).protocol == "llama-bench"


def test_llama_bench_prints_the_mean_and_sample_sd_of_the_repetitions() -> None:
    pp_test, tg_test = fitted_tests("llama-bench", 4096)
    pp = protocol_figures("llama-bench", pp_test, _figures(512, 1, [0.5, 0.25, 1.0, 0.5, 0.5], [0.0] * 5))
    rates = [1024.0, 2048.0, 512.0, 1024.0, 1024.0]
    assert pp["tokens_per_s"] == pytest.approx(statistics.fmean(rates))
    assert pp["tokens_per_s_sd"] == pytest.approx(statistics.stdev(rates))
    # tg: N tokens over the whole generation (the one-token prompt's step included)
    tg = protocol_figures("llama-bench", tg_test, _figures(1, 128, [0.01, 0.02], [1.27, 0.62]))
    assert tg["samples_tokens_per_s"] == pytest.approx([100.0, 200.0])
    case = CaseResult(workload="llama-1b", mode="generate", device="cpu", batch_size=1, prompt_len=1,
                      new_tokens=128, protocol="llama-bench",
                      generation=Generation.from_dict({**_figures(1, 128, [0.01], [1.27]).to_dict(),
                                                       "protocol": tg}))
    figures = case_figures(case)
    assert figures["tg_tokens_per_s"] == tg["tokens_per_s"] and figures["pp_tokens_per_s"] is None


def test_gpt_fast_counts_the_whole_generation_and_the_weights_it_reads() -> None:
    (test,) = fitted_tests("gpt-fast", 1024)
    section = protocol_figures("gpt-fast", test, _figures(6, 200, [0.5, 0.5], [1.5, 3.5]))
    assert section["tokens_per_s"] == pytest.approx((100 + 50) / 2)
    assert section["bandwidth_bytes_per_s"] == pytest.approx(1_000_000 * 75)


def _category_case(name: str, prompt: int, new: int, ttft: float, tpot: float,
                   precision: str = "int4-wo") -> CaseResult:
    test = next(t for t in fitted_tests("mlperf-client", 8192) if t.name == name)
    figures = _figures(prompt, new, [ttft, ttft * 3], [tpot * (new - 1), tpot * 3 * (new - 1)])
    return CaseResult(workload="llama-1b", mode="generate", device="cpu", batch_size=1,
                      prompt_len=prompt, new_tokens=new, precision=precision, protocol="mlperf-client",
                      generation=Generation.from_dict({
                          **figures.to_dict(), "protocol": protocol_figures("mlperf-client", test, figures)}))


def test_mlperf_client_reports_each_category_and_their_geometric_mean() -> None:
    cases = [_category_case(t.name, t.prompt_len, t.new_tokens, 0.1 * (i + 1), 0.01 * (i + 1))
             for i, t in enumerate(fitted_tests("mlperf-client", 8192))]
    first = cases[0].generation.protocol if cases[0].generation else None
    assert first is not None and first.ttft_mean_s == pytest.approx(0.2)  # mean of 0.1 and 0.3
    assert first.token_rate == pytest.approx(1 / 0.02)  # 1 / mean of (end - first) / (n - 1)
    (overall,) = mlperf_client_overall(cases)
    ttfts = [c.generation.protocol.ttft_mean_s for c in cases if c.generation and c.generation.protocol]
    assert overall.ttft_s == pytest.approx(math.exp(statistics.fmean(math.log(t) for t in ttfts)))
    assert overall.missing == () and len(overall.categories) == 5
    (partial,) = mlperf_client_overall(cases[:4])
    assert partial.ttft_s is None and partial.missing == ("summarisation, intermediate",)
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0) and geometric_mean([0.0, 1.0]) is None
    from accelbench.render.generation_detail import generation_detail_lines

    record = RunRecord("r1", "2026-11-26T00:00:00+00:00", "0.1.0", cases=cases)
    text = "\n".join(generation_detail_lines(record))
    assert "--protocol mlperf-client" in text and "geometric mean of 5 categories" in text
    # Issue 36: named as every case is, device before precision ("cpu int4-wo", not "int4-wo cpu").
    assert "llama-1b cpu int4-wo overall (geometric mean" in text and "int4-wo cpu" not in text


def test_the_interactive_budget_is_judged_only_on_a_llama_3_1_8b_shape() -> None:
    """Issue 28 item 2: MLPerf Inference v5.1, Llama-3.1-8B interactive: TTFT p99 <= 500 ms,
    TPOT p99 <= 30 ms."""
    fast = _figures(128, 65, [0.1, 0.2, 0.3], [64 * 0.02, 64 * 0.025, 64 * 0.02])
    slow = _figures(128, 65, [0.1, 0.2, 0.7], [64 * 0.02, 64 * 0.025, 64 * 0.02])
    assert interactive_budget({**LLAMA_3_1_8B}, fast)["meets"] is True
    judged = interactive_budget({**LLAMA_3_1_8B}, slow)
    assert judged["meets"] is False and judged["meets_ttft"] is False and judged["meets_tpot"] is True
    assert judged["tpot_p99_s"] <= INTERACTIVE_TPOT_S
    assert interactive_budget({**LLAMA_3_1_8B, "layers": 16}, fast) is None
    assert interactive_budget(None, fast) is None
    from accelbench.workloads.builtin.llama import Llama1B

    assert Llama1B("published").decoder_shape()["vocab"] == LLAMA_3_1_8B["vocab"]
    assert interactive_budget(Llama1B("published").decoder_shape(), fast) is None  # 1B is not 8B
