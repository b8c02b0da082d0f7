"""Issue 26, item 10: a generation case's first use is its first (warm-up) generation's excess over
a steady one, not TTFT less an inter-token time (that is the prefill); a compiled generation case
gets its compile time and a break-even (in generations) against the same work uncompiled."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from accelbench.devices import DeviceSet
from accelbench.measure.generation import rounds as gen
from accelbench.measure.generation.rounds import GenerationFigures, GenerationRound
from accelbench.render.steady import break_even_cell, break_even_lines, first_use_cell, steady_rows
from accelbench.results import CaseResult, RunRecord
from accelbench.results.first_use import GENERATION
from accelbench.results.generation import Generation
from accelbench.results.pairs import attach_break_evens
from accelbench.workloads import get_workload_class


def _figures(warmup: list[tuple[float, float]], rounds: list[tuple[float, float]]) -> dict[str, Any]:
    """A generation record of 1 x 8 prompt + 5 new tokens: (ttft, decode) per round."""
    def one(ttft: float, decode: float) -> GenerationRound:
        return GenerationRound(ttft, decode, tuple([decode / 4] * 4))
    return GenerationFigures(
        batch_size=1, prompt_len=8, new_tokens=5, timing_method=gen.HOST,
        rounds=tuple(one(*r) for r in rounds), warmup_rounds=len(warmup), kv_cache_bytes=1,
        weight_bytes_per_step=1, cache_bytes_per_step=1,
        warmup=tuple(one(*r) for r in warmup)).to_dict()


def _case(generation: dict[str, Any], compile_backend: str = "") -> CaseResult:
    """A generation case as the engine records it (measure_case._measure_generation)."""
    figures = GenerationFigures.from_dict(generation)
    case = CaseResult(workload="nanogpt-char", mode="generate", device="cpu", batch_size=1,
                      compile_backend=compile_backend,
                      prompt_len=8, new_tokens=5, generation=Generation.from_dict(generation))
    case.step_times = figures.token_times_s
    case.warmup_steps = figures.warmup_rounds
    case.time_to_first_step_s = figures.ttft_s
    return case


def test_first_use_is_the_first_generation_beyond_a_steady_one_not_the_prefill() -> None:
    """A 0.70 s first generation against 0.03 s steady ones: first use 0.67 s (the old figure read
    TTFT 10 ms less a 5 ms token: the prefill, 5 ms)."""
    case = _case(_figures([(0.5, 0.2)], [(0.010, 0.020)] * 3))
    costs = case.first_use()
    assert costs.unit == GENERATION and costs.compile is None and costs.first_use is not None
    assert costs.first_use.seconds == pytest.approx(0.67)
    assert costs.time_to_first_step_s == pytest.approx(0.7) and costs.warmup_steps == 1
    stored = json.loads(json.dumps(case.to_dict()))["derived"]["first_use"]
    assert stored["first_use"]["seconds"] == pytest.approx(0.67) and stored["unit"] == "generation"
    assert "1st gen 700.0 ms" in first_use_cell(case) and "/1 gen" in first_use_cell(case)


def test_a_generation_without_recorded_warm_up_rounds_has_no_first_use() -> None:
    """A result written before the warm-up rounds were kept (or --warmup 0): unknown, not the
    prefill read as a first-use cost; it loads unchanged."""
    generation = _figures([], [(0.010, 0.020)] * 3)
    del generation["warmup"]
    case = _case(generation)
    costs = case.first_use()
    assert costs.first_use is None and costs.time_to_first_step_s is None
    assert CaseResult.from_dict(json.loads(json.dumps(case.to_dict()))).generation == (
        Generation.from_dict(generation))


def test_a_compiled_generation_gets_its_compile_time_and_break_even_in_generations() -> None:
    """Compiled: a 2.03 s warm-up generation, 50 ms steady ones; uncompiled: 100 ms, its warm-up
    120 ms. Compile time 1.98 s, 20 ms of it paid uncompiled too: 1.96 s charged at 50 ms saved a
    generation pays off after about 40 generations."""
    compiled = _case(_figures([(1.5, 0.53)], [(0.010, 0.040), (0.010, 0.040), (0.011, 0.040)]),
                     "inductor")
    uncompiled = _case(_figures([(0.04, 0.08)], [(0.020, 0.080), (0.020, 0.080), (0.021, 0.080)]))
    assert compiled.first_use().compile is not None
    assert compiled.first_use().compile.seconds == pytest.approx(1.98, abs=1e-3)
    attach_break_evens([compiled, uncompiled])
    assert uncompiled.break_even is None and compiled.break_even is not None
    figure = compiled.break_even
    assert figure.unit == GENERATION and figure.pays_off
    assert figure.compile_s == pytest.approx(1.98, abs=1e-3)
    assert figure.uncompiled_warmup_s == pytest.approx(0.02, abs=1e-3)
    assert figure.charged_s == pytest.approx(1.96, abs=2e-3)
    assert figure.steps == pytest.approx(1.96 / 0.05, rel=0.05)
    assert figure.describe().startswith("compile pays off after 40 generations")
    assert break_even_cell(compiled) == "after 40 generations"
    record = RunRecord("r", "2024-01-01T00:00:00+00:00", "0", cases=[compiled, uncompiled])
    (line,) = break_even_lines(record)
    assert "the uncompiled generation" in line and "s charged" in line
    rows = steady_rows([("A", compiled), ("A", uncompiled)])
    assert len(rows) == 2 and "(1 generation)" in rows[0][6]
    assert rows[0][8].startswith("pays off after 40 generations")


def test_measure_generation_keeps_its_warm_up_rounds() -> None:
    workload = get_workload_class("nanogpt-char")("tiny")
    torch.manual_seed(0)
    model = workload.build_model().eval()
    device = DeviceSet.current().select("cpu")[0]
    figures = gen.measure_generation(workload, model, device, prompt_len=4, new_tokens=3, rounds=2,
                                     warmup_rounds=2)
    assert len(figures.warmup) == 2 and len(figures.rounds) == 2
    assert all(r.ttft_s > 0 and len(r.token_times_s) == 2 for r in figures.warmup)
    assert GenerationFigures.from_dict(json.loads(json.dumps(figures.to_dict()))) == figures


def test_run_generate_compiled_beside_uncompiled_reports_compile_and_break_even(
        cli, tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    done = cli("run", "nanogpt-char", "--mode", "generate", "--size", "tiny", "--prompt-len", "8",
               "--new-tokens", "4", "--compile", "eager,none", "--steps", "3", "--isolation",
               "none", "-o", str(out))
    assert done.returncode == 0, done.stderr
    by_backend = {c["compile_backend"]: c for c in json.loads(out.read_text())["cases"]}
    compiled, uncompiled = by_backend["eager"], by_backend[""]
    assert compiled["generation"]["warmup"] and compiled["derived"]["first_use"]["compile"]
    assert uncompiled["derived"]["first_use"]["first_use"] is not None
    figure = compiled["break_even"]
    assert figure is not None and figure["unit"] == "generation"
    assert "generation" in done.stdout and "compile time" in done.stdout
    # Run inline after the compiled case, the uncompiled one did not start cold, and says so.
    assert uncompiled["start"]["warm"] and "warm" in figure["caveat"]
    # Issue 36: a generation case's first step is one figure, its first whole generation (not
    # its TTFT), in the result, its figures, the CSV, the HUD export and compare's table.
    from accelbench.render.export import to_csv
    from accelbench.render.format import format_seconds
    from accelbench.render.hud import to_hud
    from accelbench.store.jsonfile import load_record

    record = load_record(out)
    rows = list(csv.DictReader(io.StringIO(to_csv(record))))
    hud = [r for r in json.loads(to_hud(record)) if r["metric"]["name"] == "time_to_first_step_s"]
    for stored, case, row in zip(json.loads(out.read_text())["cases"], record.cases, rows, strict=True):
        first = stored["generation"]["warmup"][0]
        whole = first["ttft_s"] + first["decode_s"]
        assert stored["time_to_first_step_s"] == pytest.approx(whole) != stored["generation"]["ttft_s"]
        assert stored["derived"]["first_use"]["time_to_first_step_s"] == pytest.approx(whole)
        assert stored["derived"]["figures"]["time_to_first_step_s"] == pytest.approx(whole)
        assert float(row["time_to_first_step_s"]) == pytest.approx(whole)
        assert format_seconds(whole) in steady_rows([("A", case)])[0]
    wholes = sorted(c["time_to_first_step_s"] for c in json.loads(out.read_text())["cases"])
    assert sorted(r["metric"]["benchmark_values"][0] for r in hud) == pytest.approx(wholes, rel=1e-5)


def test_a_negative_first_use_reads_approximately_zero_with_why_everywhere(tmp_path: Path) -> None:
    """Issue 36: a first step 31.6 ms quicker than the steady median printed "0 µs" in the run
    table's first-use cell and "0 µs (≈0)" in compare's; one wording now, with why."""
    from accelbench.store.jsonfile import load_record, save_record

    train = CaseResult(workload="vae", mode="train", device="cpu", batch_size=8,
                       step_times=[0.1, 0.1, 0.1], warmup_steps=1, warmup_time_s=0.0684,
                       time_to_first_step_s=0.0684)
    generation = _case(_figures([(0.001, 0.01)], [(0.010, 0.020)] * 3))  # first generation quicker
    record = RunRecord(run_id="neg", created_at="2026-01-01T00:00:00+00:00", accelbench_version="0",
                       command=[], environment={}, cases=[train, generation])
    loaded = load_record(save_record(record, tmp_path / "neg.json"))
    for case, unit in zip(loaded.cases, ("step", "generation"), strict=True):
        cost = case.first_use().first_use
        assert cost is not None and cost.seconds < 0
        said = f"≈0 (the first {unit} no slower than the rest)"
        cells = [first_use_cell(case), *steady_rows([("A", case)])[0]]
        assert any(said in cell for cell in cells), cells
        assert not any("0 µs" in cell for cell in cells), cells
