"""Issue 33, "Figures that settle": generation rounds obey --time-budget and --target-ci as steps
do (at least 5 rounds, warm-up until two rounds agree, the stop reason recorded), a percentile of
too few values is shown as what it is ("max of N"), rounds that spread more than 10% are flagged
noisy, an interval wider than its figure reads as noise, and a busy machine says so once.

The rules are judged on series the tests control; the end-to-end runs assert only what holds
under any load (other work runs beside these tests)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from accelbench.engine.case import generation_rounds
from accelbench.measure.generation import rounds as gen
from accelbench.measure.generation.settle import (
    FIXED_COUNT,
    MAX_WARMUP_ROUNDS,
    RoundRule,
    tail,
    tail_min_values,
)
from accelbench.measure.loop.median_ci import relative_median_ci_half_width
from accelbench.measure.loop.stop import MIN_SAMPLES, StopRule
from accelbench.options.values import build_run_options
from accelbench.render.format import format_interval
from accelbench.render.generation_table import (
    GENERATION_COLUMNS,
    WIDE_COLUMNS,
    generation_notes,
    generation_rows,
)
from accelbench.render.table import busy_line, notes_cell, rate_cell, stop_cell
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import case_figures, tail_label
from accelbench.results.generation import Generation

pytestmark = pytest.mark.usefixtures("one_thread")


# --- the rule, on series the test controls ------------------------------------------------------
def test_a_fixed_count_is_exactly_that_many_rounds_after_the_warmup_asked_for() -> None:
    rule = RoundRule(4, warmup=1)
    assert rule.warmed_up([]) is False and rule.warmed_up([9.0]) is True  # one, however slow
    assert [rule.stop_reason([1.0] * n, 100.0) for n in range(6)] == ["", "", "", "", FIXED_COUNT,
                                                                       FIXED_COUNT]
    assert RoundRule(4, warmup=0).warmed_up([]) is True


def test_a_time_budget_takes_at_least_five_rounds_and_stops_when_spent() -> None:
    rule = RoundRule(0, 1, StopRule("time", 2.0, 0.0))  # no precision target: the budget alone
    spread = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0]
    assert rule.stop_reason(spread[:MIN_SAMPLES - 1], 50.0) == ""  # spent, but fewer than 5
    assert rule.stop_reason(spread[:MIN_SAMPLES], 1.9) == ""  # 5, within the budget
    assert rule.stop_reason(spread[:MIN_SAMPLES], 2.0) == "time budget"


def test_a_precision_target_ends_rounds_once_the_median_tpot_interval_is_within_it() -> None:
    rule = RoundRule(0, 1, StopRule("time", 60.0, 5.0))
    steady = [0.0100, 0.0101, 0.0099, 0.0100, 0.0102]
    assert relative_median_ci_half_width(steady) * 100 <= 5.0
    assert rule.stop_reason(steady, 0.05) == "precision reached"
    # Rounds 2x apart never reach +-5%: measuring goes on until the budget is spent.
    apart = [0.010, 0.020] * 10
    assert rule.stop_reason(apart, 59.0) == ""
    assert rule.stop_reason(apart, 60.0) == "time budget"


def test_warmup_under_a_budget_runs_until_two_rounds_agree() -> None:
    rule = RoundRule(0, 1, StopRule("time", 2.0))
    assert rule.warmed_up([3.0]) is False  # one round cannot agree with anything
    assert rule.warmed_up([3.0, 1.0]) is False  # the first use (or a compile) still in it
    assert rule.warmed_up([3.0, 1.0, 1.05]) is True  # within 10% of each other
    assert rule.warmed_up([3.0, 0.1, 0.2, 0.1][:MAX_WARMUP_ROUNDS - 1]) is False
    assert rule.warmed_up([3.0, 0.1, 0.2, 0.1, 0.2]) is True  # never settles: capped, not endless
    # Past the first round, the warm-up spends at most the budget (2 s here) however rounds differ.
    assert rule.warmed_up([3.0, 1.0, 0.5]) is False and rule.warmed_up([3.0, 1.0, 1.5]) is True
    assert RoundRule(0, 0, StopRule("time", 2.0)).warmed_up([]) is True  # --warmup 0: none


# --- the rule a run's options give --------------------------------------------------------------
def _rounds(**keywords: object) -> tuple[object, int, str]:
    return generation_rounds(build_run_options("nanogpt-char", "cpu", "generate", **keywords))


def test_options_give_rounds_a_count_a_protocols_count_or_the_time_budget() -> None:
    assert _rounds(size="tiny", steps=4)[0] == 4  # --steps N is exactly N rounds
    tiny = _rounds(size="tiny")
    assert isinstance(tiny[0], StopRule) and tiny[0].value == 0.5  # the tiny size's budget
    assert "at least 5 generation rounds" in tiny[2] and "median TPOT" in tiny[2]
    budget = _rounds(size="tiny", time_budget=2)[0]
    assert isinstance(budget, StopRule) and budget.value == 2
    # A protocol keeps its own count, unless the budget or the target is given.
    own = _rounds(size="tiny", protocol="llama-bench")
    assert own[0] == 5 and "llama-bench's own count" in own[2]
    assert isinstance(_rounds(size="tiny", protocol="llama-bench", time_budget=2)[0], StopRule)
    assert isinstance(_rounds(size="tiny", protocol="llama-bench", target_ci=5)[0], StopRule)
    assert _rounds(size="tiny", protocol="llama-bench", steps=2)[0] == 2
    assert _rounds(size="tiny", warmup=0)[1] == 0


# --- the measurement, on this CPU -----------------------------------------------------------------
def _tiny_decoder() -> tuple[object, object]:
    from accelbench.workloads.builtin.nanogpt_char import NanoGPTChar

    workload = NanoGPTChar("tiny")
    return workload, workload.build_model().eval()


def test_measure_generation_under_a_budget_times_at_least_five_rounds_and_says_why() -> None:
    from accelbench.devices import DeviceSet

    workload, model = _tiny_decoder()
    (cpu,) = DeviceSet.current().select("cpu")
    budget = StopRule("time", 0.05, 0.0)
    figures = gen.measure_generation(workload, model, cpu, prompt_len=4, new_tokens=4, rounds=budget)
    assert len(figures.rounds) >= MIN_SAMPLES and figures.stop_reason == "time budget"
    assert sum(r.ttft_s + r.decode_s for r in figures.rounds) >= 0.05
    assert figures.warmup_rounds == len(figures.warmup) >= 2  # two at least, to agree
    stored = figures.to_dict()
    assert stored["stop_reason"] == "time budget"
    assert gen.GenerationFigures.from_dict(stored).stop_reason == "time budget"
    fixed = gen.measure_generation(workload, model, cpu, prompt_len=4, new_tokens=4, rounds=2,
                                   warmup_rounds=1)
    assert (len(fixed.rounds), fixed.warmup_rounds, fixed.stop_reason) == (2, 1, FIXED_COUNT)


def test_run_with_a_time_budget_gives_more_than_three_rounds_and_the_stop_reason(
        cli, tmp_path: Path) -> None:
    out = tmp_path / "gen.json"
    done = cli("run", "nanogpt-char", "--size", "tiny", "--device", "cpu", "--mode", "generate",
               "--prompt-len", "8", "--new-tokens", "8", "--time-budget", "2", "--isolation", "none",
               "-o", str(out))
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    figures = case["generation"]
    assert len(figures["rounds"]) > 3
    assert figures["stop_reason"] == case["stop_reason"]
    assert case["stop_reason"] in ("time budget", "precision reached")
    if case["stop_reason"] == "time budget":
        assert sum(r["ttft_s"] + r["decode_s"] for r in figures["rounds"]) >= 2
    assert case["stop_rule"].startswith("time budget 2 s")
    assert f"generation rounds: {len(figures['rounds'])} timed, stopped by {case['stop_reason']}" \
        in " ".join(done.stdout.split())


# --- what the figures are, and how every surface shows them ---------------------------------------
def _case(tpots: list[float], ttfts: list[float] | None = None, token_times: int = 0,
          environment: dict | None = None) -> RunRecord:
    new = 9
    rounds = tuple(gen.GenerationRound(ttft, tpot * (new - 1), (tpot,) * token_times)
                   for ttft, tpot in zip(ttfts or [0.002] * len(tpots), tpots, strict=True))
    figures = gen.GenerationFigures(batch_size=1, prompt_len=8, new_tokens=new, timing_method="host",
                                    rounds=rounds, warmup_rounds=1, kv_cache_bytes=1,
                                    weight_bytes_per_step=1000, cache_bytes_per_step=10,
                                    stop_reason="time budget")
    case = CaseResult(workload="nanogpt-char", mode="generate", device="cpu", batch_size=1,
                      prompt_len=8, new_tokens=new, size="tiny", stop_rule="time budget 2 s",
                      stop_reason="time budget",
                      step_times=[r.decode_s / (new - 1) for r in rounds],
                      generation=Generation.from_dict(figures.to_dict()))
    return RunRecord("g1", "2026-11-27T00:00:00+00:00", "0.1.0", cases=[case],
                     environment=environment or {})


def _cells(record: RunRecord) -> dict[str, str]:
    (row,) = generation_rows(record, wide=True)
    return dict(zip(GENERATION_COLUMNS + WIDE_COLUMNS, row, strict=True))


def test_a_percentile_needs_one_value_above_it() -> None:
    assert (tail_min_values(90), tail_min_values(99)) == (10, 100)
    assert tail([1.0, 2.0, 5.0], 99) == (5.0, "max of 3")
    values = [float(i) for i in range(100)]
    assert tail(values, 99) == (pytest.approx(98.01), "p99 of 100")
    assert tail(values[:10], 90) == (pytest.approx(8.1), "p90 of 10")


def test_a_p99_over_few_rounds_is_stored_and_shown_as_max_of_n() -> None:
    record = _case([0.001, 0.0011, 0.0015], ttfts=[0.002, 0.003, 0.009])
    (case,) = record.cases
    stored = case.generation
    assert stored is not None and stored.tail_statistics is not None
    assert stored.ttft_p99_s == stored.ttft_p90_s == 0.009  # the maximum, not interpolated
    assert stored.tail_statistics["ttft_p99_s"] == "max of 3"
    assert case_figures(case)["tpot_p99_s"] == pytest.approx(0.0015)
    assert tail_label(stored, "ttft_p99_s") == "TTFT max of 3"
    cells = _cells(record)
    assert cells["TTFT p90/p99"] == "max of 3: 9.0 ms"
    assert cells["TPOT p99"] == "max of 3: 1.5 ms"
    assert "p99" not in cells["TTFT p90/p99"] + cells["TPOT p99"]
    # Enough per-token gaps for a 99th percentile: shown as the percentile it is.
    many = _case([0.001] * 12, token_times=10)
    assert (many.cases[0].generation.tail_statistics or {})["itl_p99_s"] == "p99 of 120"
    assert "max of" not in _cells(many)["ITL p50/p99"]
    few = _case([0.001] * 3, token_times=8)
    assert "max of 24: 1.0 ms" in _cells(few)["ITL p50/p99"]


def test_a_result_written_before_tail_statistics_reads_as_before() -> None:
    record = _case([0.001, 0.0011, 0.0015])
    record.cases[0].generation = replace(record.cases[0].generation, tail_statistics=None)
    assert tail_label(record.cases[0].generation, "ttft_p99_s") == "TTFT p99"
    assert "max of" not in _cells(record)["TPOT p99"]


def test_rounds_that_spread_more_than_ten_percent_are_flagged_noisy() -> None:
    apart = _case([0.001, 0.002, 0.001, 0.002, 0.001])  # rounds 2x apart
    assert apart.cases[0].generation.noisy is True
    assert case_figures(apart.cases[0])["round_spread"] > 0.10
    assert _cells(apart)["decode tok/s"].endswith("noisy")
    assert "noisy" in notes_cell(apart.cases[0])
    steady = _case([0.00100, 0.00101, 0.00099, 0.00100, 0.00102])
    assert steady.cases[0].generation.noisy is False
    assert "noisy" not in _cells(steady)["decode tok/s"] and "noisy" not in notes_cell(steady.cases[0])


def test_the_stop_reason_and_rounds_show_in_the_table_and_notes() -> None:
    record = _case([0.00100, 0.00101, 0.00099, 0.00100, 0.00102, 0.00100])
    assert _cells(record)["rounds"] == "6 (time budget)"
    assert "generation rounds: 6 timed, stopped by time budget (time budget 2 s)" in generation_notes(record)
    # The stop cell reads the median TPOT's interval across rounds, not the pooled token gaps.
    assert stop_cell(record.cases[0]).startswith("time budget (median ±")


def test_an_interval_wider_than_its_figure_reads_as_noise_in_words() -> None:
    assert format_interval(100.0, 98.0, 103.0) == "±3.0%"
    # The newcomer's "vae eval 283 ±6719%": a range, called noise, not a ±%.
    assert format_interval(283.0, 4.2, 19_300.0) == "noise: 4.2–19,300"
    case = CaseResult(workload="vae", mode="eval", device="cpu", batch_size=1,
                      step_times=[0.0035, 0.2, 0.00005, 0.0035, 0.0035])
    cell = rate_cell(case)
    assert "noise:" in cell and "%" not in cell


def test_a_busy_machine_is_said_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from accelbench.cli.run import _show

    busy = _case([0.001] * 5, environment={"power": {"load_per_cpu": {"value": 1.9}}})
    assert busy_line(busy) == "machine busy (load 1.9 per CPU): figures not reliable"
    assert busy_line(_case([0.001] * 5, environment={"power": {"load_per_cpu": {"value": 0.2}}})) == ""
    assert busy_line(_case([0.001] * 5)) == ""  # not recorded: nothing said
    # What `accelbench run` prints under its tables: the line once.
    _show(busy, tmp_path / "saved.json", None, wide=False, against=[])
    printed = capsys.readouterr().out
    assert "Generation" in printed and printed.count("machine busy (load 1.9 per CPU)") == 1
    # --json carries the same words (and null on a quiet machine).
    _show(busy, tmp_path / "saved.json", None, wide=False, against=[], as_json=True)
    assert json.loads(capsys.readouterr().out)["busy"] == busy_line(busy)
    quiet = _case([0.001] * 5, environment={"power": {"load_per_cpu": {"value": 0.2}}})
    _show(quiet, tmp_path / "saved.json", None, wide=False, against=[], as_json=True)
    assert json.loads(capsys.readouterr().out)["busy"] is None
