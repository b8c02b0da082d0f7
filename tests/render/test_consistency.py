"""One consistency test (issue 26, "the cause, removed"): one result of each kind (train, eval,
generate, sustained, a compiled pair, a repeat) rendered through every surface; each figure shows
the same value everywhere, to the surface's display precision.

Surfaces: the run table (and --wide), the generation table, the sustained and break-even lines,
the result JSON (``derived.figures``), the history (timeline, table, --json), compare (table and
--json), a share bundle and the peers/site read from it, CSV and Markdown export, the HTML report
and the notebook view."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from conftest import rendered_text

from accelbench.compare import LabelledRun, compare_runs
from accelbench.engine.repeat import merge_repeats
from accelbench.measure.generation.rounds import GenerationFigures, GenerationRound
from accelbench.measure.loop.sustained import SustainedSeries
from accelbench.render.compare_table import comparison_renderable, epoch_cell, rate_cell
from accelbench.render.export import to_csv, to_markdown
from accelbench.render.format import format_rate, format_seconds
from accelbench.render.generation_table import generation_table
from accelbench.render.history_table import timeline_table
from accelbench.render.html import render_report
from accelbench.render.json_views import comparison_json, history_json
from accelbench.render.notebook import record_html
from accelbench.render.site import render_site
from accelbench.render.steady import break_even_lines, sustained_lines
from accelbench.render.table import run_table
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import case_figures, headline
from accelbench.results.generation import Generation
from accelbench.results.pairs import attach_break_evens
from accelbench.results.sustained import SustainedRecord, sustained_figures
from accelbench.sharing.build import build_bundle
from accelbench.sharing.bundle import parse_line
from accelbench.sharing.peer_view import peer_of
from accelbench.store.history import HistoryDB

ENV = {"machine": {"hostname": "bench-host"}}


def _steps(median: float, n: int = 12) -> list[float]:
    return [median * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(n)]


def _train(mode: str, median: float, **fields: object) -> CaseResult:
    return CaseResult(workload="mnist", mode=mode, device="cpu", batch_size=64, size="tiny",
                      dataset_size=60000, step_times=_steps(median), warmup_steps=3,
                      time_to_first_step_s=median * 4, warmup_time_s=median * 6,
                      measured_steps=12, measured_time_s=12 * median, **fields)  # type: ignore[arg-type]


def _generate(scale: float) -> CaseResult:
    rounds = tuple(GenerationRound(0.004 * scale * (1 + 0.02 * i), 0.021 * scale * (1 + 0.01 * i),
                                   tuple([0.003 * scale] * 7)) for i in range(5))
    warm = (GenerationRound(0.04 * scale, 0.05 * scale, tuple([0.007 * scale] * 7)),)
    figures = GenerationFigures(batch_size=2, prompt_len=8, new_tokens=8, timing_method="host clock",
                                rounds=rounds, warmup_rounds=1, kv_cache_bytes=4096,
                                weight_bytes_per_step=10**6, cache_bytes_per_step=2048,
                                warmup=warm)
    generation = Generation.from_dict({**figures.to_dict(), "bandwidth_share": 0.01,
                                       "bandwidth_reference_bytes_per_s": 1e11,
                                       "bandwidth_verdict": "within"})
    return CaseResult(workload="nanogpt-char", mode="generate", device="cpu", batch_size=2,
                      size="tiny", prompt_len=8, new_tokens=8,
                      step_times=[t for r in rounds for t in r.token_times_s],
                      generation=generation)


def _sustained(median: float) -> CaseResult:
    rates = [1 / median] * 4 + [0.8 / median] * 6
    series = SustainedSeries(1.0, 10.0, "steps", work=[r * 1.0 for r in rates], seconds=[1.0] * 10,
                             ends=[float(i + 1) for i in range(10)])
    record = SustainedRecord(series, sustained_figures(series))
    return _train("train", median, precision="bf16", sustained=record)


def _record(run_id: str, scale: float) -> RunRecord:
    compiled = _train("eval", 0.010 * scale, compile_backend="inductor")
    compiled.warmup_time_s = 5.0
    uncompiled = _train("eval", 0.012 * scale)
    repeats = merge_repeats([_train("train", 0.05 * scale, precision="fp16"),
                             _train("train", 0.052 * scale, precision="fp16"),
                             _train("train", 0.049 * scale, precision="fp16")])
    cases = [_train("train", 0.04 * scale), _train("eval", 0.008 * scale, channels_last=True),
             _generate(scale), _sustained(0.03 * scale), compiled, uncompiled, repeats]
    attach_break_evens(cases)
    return RunRecord(run_id, f"2026-11-2{int(scale)}T00:00:00+00:00", "0.1.0", cases=cases,
                     environment=ENV)


@pytest.fixture(scope="module")
def runs() -> tuple[RunRecord, RunRecord]:
    return _record("run-a", 1), _record("run-b", 2)


_text = rendered_text


def test_the_kinds_are_all_there(runs: tuple[RunRecord, RunRecord]) -> None:
    a, _ = runs
    assert {c.mode for c in a.cases} == {"train", "eval", "generate"}
    assert a.cases[3].sustained and a.cases[4].break_even and len(a.cases[6].repeats) == 3


def test_every_surface_shows_each_case_s_rate(runs: tuple[RunRecord, RunRecord], tmp_path: Path) -> None:
    a, b = runs
    table = _text(run_table(a)) + _text(run_table(a, wide=True)) + _text(generation_table(a))
    notebook = record_html(a)
    markdown = to_markdown(a)
    rows = list(csv.DictReader(io.StringIO(to_csv(a))))
    stored = json.loads(json.dumps(a.to_dict()))["cases"]
    comparisons = compare_runs([LabelledRun("A", a), LabelledRun("B", b)])
    report = render_report([LabelledRun("A", a), LabelledRun("B", b)], comparisons)
    judged = json.loads(comparison_json(comparisons))
    compared = _text(comparison_renderable(comparisons))
    with HistoryDB(tmp_path / "h.sqlite") as db:
        db.add_record(a)
        timelines = {(c.workload, c.mode): db.timeline(c.workload, c.mode) for c in a.cases}
        listed = json.loads(history_json(tmp_path / "h.sqlite", db.list_runs(), None, None))
    assert [r["run_id"] for r in listed["runs"]] == ["run-a"]
    lines = [parse_line(line) for line in build_bundle([a], "m" * 32).lines]
    for index, case in enumerate(a.cases):
        rate, shown = case.throughput(), format_rate(case.throughput())
        name = headline(case.mode).name
        assert rate and rate == case_figures(case)[name]
        # the result file and the export
        assert stored[index]["derived"]["figures"] == pytest.approx(case_figures(case), nan_ok=True)
        assert stored[index]["derived"]["throughput_samples_per_s"] == rate
        assert float(rows[index]["rate"]) == pytest.approx(rate)
        assert float(rows[index][name]) == pytest.approx(rate)
        assert f"{rate:,.1f}" in markdown
        # the tables and the views that print the figure
        for surface, text in (("run tables", table), ("notebook", notebook)):
            assert shown in text, f"{surface} lacks {case.workload} {case.mode}'s {shown}"
        # the report's machine tables show what compare's do: the rate (the ratios' figure), and
        # the epoch where the case has one
        for cell in (rate_cell(case, unit=False), epoch_cell(case)):
            assert cell in report and cell in compared
        # the history
        points = [p for p in timelines[case.workload, case.mode] if p.throughput == pytest.approx(rate)]
        assert points, f"history has no point at {rate}"
        assert shown in _text(timeline_table(case.workload, case.mode, timelines[case.workload, case.mode]))
        # compare --json: the row's figures are the case's
        views = [view for group in judged["comparisons"] for row in group["rows"]
                 for view in (row["cpu"], row["accelerator"]) if view and view["rate"] == pytest.approx(rate)]
        assert views and views[0]["figures"][name] == pytest.approx(rate)
        # the bundle: every catalogue figure, to the bundle's 6 significant digits
        line = lines[index]
        for figure, value in case_figures(case).items():
            if value is not None:
                assert line["figures"][figure] == pytest.approx(value, rel=1e-5), figure
        peer = peer_of(line)
        assert peer is not None and peer.throughput == pytest.approx(rate, rel=1e-5)
    site = "".join(render_site([p for line in lines if (p := peer_of(line)) is not None]).values())
    for case in a.cases:
        assert format_rate(case.throughput()) in site


def test_generation_figures_read_the_same_in_the_table_json_and_bundle(
        runs: tuple[RunRecord, RunRecord]) -> None:
    a, _ = runs
    case = next(c for c in a.cases if c.mode == "generate")
    figures = case_figures(case)
    table = _text(generation_table(a))
    for name in ("decode_tokens_per_s_total", "decode_tokens_per_s", "prefill_tokens_per_s"):
        assert format_rate(figures[name]) in table, name
    assert format_seconds(figures["ttft_s"]) in table
    assert figures["decode_tokens_per_s_total"] == pytest.approx(2 / figures["tpot_s"])
    assert figures["prefill_tokens_per_s"] == pytest.approx(2 * 8 / figures["ttft_s"])
    (line,) = [parse_line(x) for x in build_bundle([a], "m" * 32).lines
               if json.loads(x)["key"]["mode"] == "generate"]
    assert line["rate_unit"] == "decode tokens/s"
    assert line["figures"]["ttft_s"] == pytest.approx(figures["ttft_s"], rel=1e-5)


def test_sustained_and_break_even_read_the_same_in_their_lines_and_the_bundle(
        runs: tuple[RunRecord, RunRecord]) -> None:
    a, _ = runs
    sustained = next(c for c in a.cases if c.sustained)
    figures = case_figures(sustained)
    (line,) = sustained_lines(a)
    assert f"burst {format_rate(figures['burst'])} samples/s" in line
    assert f"sustained {format_rate(figures['sustained'])}" in line
    compiled = next(c for c in a.cases if c.break_even)
    steps = case_figures(compiled)["break_even_steps"]
    assert compiled.break_even is not None and steps == compiled.break_even.steps
    assert case_figures(compiled)["compile_s"] == pytest.approx(compiled.break_even.compile_s)
    assert any(format_seconds(compiled.break_even.compile_s) in text for text in break_even_lines(a))
    bundle = [parse_line(x) for x in build_bundle([a], "m" * 32).lines]
    shared = {line["key"]["compile_backend"]: line for line in bundle
              if line["key"]["mode"] == "eval" and not line["key"]["channels_last"]}
    assert shared["inductor"]["figures"]["compile_s"] == pytest.approx(case_figures(compiled)["compile_s"],
                                                                     rel=1e-5)
    bundle_sustained = [parse_line(x) for x in build_bundle([a], "m" * 32).lines
                        if json.loads(x)["key"]["precision"] == "bf16"]
    assert bundle_sustained[0]["figures"]["burst"] == pytest.approx(figures["burst"], rel=1e-5)


def test_compare_reads_the_rate_ratio_its_rows_show(runs: tuple[RunRecord, RunRecord]) -> None:
    a, b = runs
    comparisons = compare_runs([LabelledRun("A", a), LabelledRun("B", b)])
    text = _text(comparison_renderable(comparisons))
    for group in comparisons:
        for pair in group.pairs:
            if pair.verdict.ratio is None:
                continue
            assert pair.verdict.ratio == pytest.approx(pair.b.throughput() / pair.a.throughput())
            assert f"{pair.verdict.ratio:.2f}x" in text
