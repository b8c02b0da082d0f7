"""Issue 33, "each protocol's figure, one truth": a --protocol case showed two figures (the
table's median and the protocol line's mean: gpt-fast 202 vs 335 tokens/s), history, compare and
the site showed accelbench's median, and llama-bench's pp lines were shared with empty figures.
Here each protocol case's rate is its peer's own figure (results/catalogue.headline), and one
result is rendered through every surface: the table, --json, history, compare, share, peers, the
site and compare --published all read the same number; a pp line is shared and placed among peers.
The rounds are chosen so that the peer's mean and accelbench's median differ: a surface that
showed the median would fail. Each protocol times the way its peer observes a token: a real run."""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
from pathlib import Path

import pytest
from conftest import rendered_text

from accelbench.compare import LabelledRun, compare_runs
from accelbench.engine.repeat import merge_repeats
from accelbench.measure.generation.generation_clocks import STREAMED
from accelbench.measure.generation.protocols import protocol_figures
from accelbench.measure.generation.rounds import GenerationFigures, GenerationRound
from accelbench.render.compare_table import comparison_renderable, rate_cell
from accelbench.render.export import export
from accelbench.render.format import format_rate, format_seconds
from accelbench.render.generation_table import (
    GENERATION_COLUMNS,
    generation_notes,
    generation_rows,
    generation_table,
)
from accelbench.render.history_table import timeline_table
from accelbench.render.json_views import comparison_json, history_json, record_view
from accelbench.render.published_generation import published_generation, published_rows, published_view
from accelbench.render.site import render_site
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import BY_NAME, case_figures, case_headline, headline, markdown_table
from accelbench.results.generation import Generation
from accelbench.results.process import process_step_times
from accelbench.results.protocol_summary import geometric_mean, mlperf_client_overall
from accelbench.results.stats import geometric_ci
from accelbench.sharing.against import compare_against
from accelbench.sharing.build import build_bundle
from accelbench.sharing.bundle import parse_line
from accelbench.sharing.peer_view import peer_of
from accelbench.store.history import HistoryDB
from accelbench.workloads.protocols import (
    DEVICE_CADENCE,
    PER_TOKEN_READ,
    fitted_tests,
    reads_each_token,
    reported_figure,
)

ENV = {"machine": {"hostname": "bench-host"}}
MODEL = "Test CPU 9000"
#: Per-round time multipliers whose mean is far from their median (one slow, one fast round).
SPREAD = (1.0, 1.0, 1.0, 2.5, 0.5)


def _case(protocol: str, test_name: str, scale: float, context: int = 8192) -> CaseResult:
    test = next(t for t in fitted_tests(protocol, context) if t.name == test_name)
    spread = SPREAD[:3] if protocol == "mlperf-client" else SPREAD
    steps = test.new_tokens - 1
    rounds = tuple(GenerationRound(0.002 * test.prompt_len * scale * k, 0.004 * steps * scale * k,
                                   tuple([0.004 * scale * k] * steps)) for k in spread)
    figures = GenerationFigures(batch_size=1, prompt_len=test.prompt_len, new_tokens=test.new_tokens,
                                timing_method=STREAMED if test.reads_each_token else "host clock",
                                rounds=rounds, warmup_rounds=1, kv_cache_bytes=4096,
                                weight_bytes_per_step=10**6, cache_bytes_per_step=2048,
                                streamed=test.reads_each_token)
    generation = Generation.from_dict({
        **figures.to_dict(), "protocol": protocol_figures(protocol, test, figures),
        "bandwidth_reference_bytes_per_s": 1e11, "bandwidth_share": 0.01, "bandwidth_verdict": "within"})
    return CaseResult(workload="llama-1b", mode="generate", device="cpu", device_name=MODEL, batch_size=1,
                      size="tiny", prompt_len=test.prompt_len, new_tokens=test.new_tokens,
                      protocol=protocol, step_times=list(figures.token_times_s) or [r.ttft_s for r in rounds],
                      generation=generation)


def _record(run_id: str, scale: float) -> RunRecord:
    cases = [_case("llama-bench", "pp512", scale), _case("llama-bench", "tg128", scale),
             _case("gpt-fast", "gpt-fast", scale)]
    cases += [_case("mlperf-client", t.name, scale) for t in fitted_tests("mlperf-client", 8192)]
    return RunRecord(run_id, f"2026-11-2{int(scale)}T00:00:00+00:00", "0.1.0", cases=cases, environment=ENV)


@pytest.fixture(scope="module")
def runs() -> tuple[RunRecord, RunRecord]:
    return _record("run-a", 1), _record("run-b", 2)


_text = rendered_text


def test_each_protocol_case_s_rate_is_its_peer_s_figure(runs: tuple[RunRecord, RunRecord]) -> None:
    a, _ = runs
    names = [case_headline(c).name for c in a.cases]
    assert names[:3] == ["pp_tokens_per_s", "tg_tokens_per_s", "gpt_fast_tokens_per_s"]
    assert set(names[3:]) == {"mlperf_token_rate"}
    pp, tg, gpt_fast = a.cases[:3]
    sections = [c.generation for c in a.cases[:4]]
    assert all(s is not None and s.protocol is not None for s in sections)
    pp_, tg_, gpt_fast_, category = sections
    assert pp.throughput() == pp_.protocol.tokens_per_s
    assert tg.throughput() == tg_.protocol.tokens_per_s
    assert gpt_fast.throughput() == gpt_fast_.protocol.tokens_per_s
    assert a.cases[3].throughput() == category.protocol.token_rate
    # The peer's mean is not accelbench's median (what every surface showed before).
    assert abs(tg.throughput() / tg_.output_tokens_per_s - 1) > 0.05
    assert abs(pp.throughput() / pp_.prefill_tokens_per_s - 1) > 0.05
    assert headline("generate").name == "decode_tokens_per_s_total"  # a case without a protocol
    for case in a.cases:  # the rate's interval is of the rate's own statistic
        low, high = case.throughput_ci()
        assert low <= case.throughput() <= high
        assert case.rate_unit() == case_headline(case).label


def test_every_surface_reads_the_protocol_figure(runs: tuple[RunRecord, RunRecord], tmp_path: Path) -> None:
    a, b = runs
    table = _text(generation_table(a))
    notes = "\n".join(generation_notes(a))
    views = record_view(a)["cases"]
    comparisons = compare_runs([LabelledRun("A", a), LabelledRun("B", b)])
    compared = _text(comparison_renderable(comparisons))
    judged = [v for group in json.loads(comparison_json(comparisons))["comparisons"]
              for row in group["rows"] for v in (row["cpu"], row["accelerator"]) if v]
    with HistoryDB(tmp_path / "h.sqlite") as db:
        db.add_record(a)
        timeline = db.timeline("llama-1b", "generate")
    history = _text(timeline_table("llama-1b", "generate", timeline))
    points = json.loads(history_json(tmp_path / "h.sqlite", [], timeline, "generate"))["timeline"]
    lines = [parse_line(line) for line in build_bundle([a], "m" * 32).lines]
    peers = [peer_of(line) for line in lines]
    site = "".join(render_site([p for p in peers if p is not None]).values())
    published = [row for row in published_rows([("A", a)]) if row[0].startswith("yours")]
    for index, case in enumerate(a.cases):
        figure = case_headline(case)
        rate = case.throughput()
        shown = format_rate(rate)
        assert rate and case_figures(case)[figure.name] == rate
        # the table: the marked cell, and the protocol line under it
        assert f"{shown}*" in table, (figure.name, shown)
        assert shown in notes
        # --json: the rate, its name and unit, and the catalogue figure
        view = views[index]
        assert (view["rate"], view["rate_name"], view["rate_unit"]) == (rate, figure.name, figure.label)
        assert view["figures"][figure.name] == rate
        # history: the stored point, its table and --json
        (point,) = [p for p in points if p["key"]["prompt_len"] == case.prompt_len
                    and p["key"]["new_tokens"] == case.new_tokens]
        assert point["throughput"] == pytest.approx(rate) and point["rate_unit"] == figure.label
        assert shown in history
        # compare: the row's cell and its --json view
        assert rate_cell(case).startswith(shown) and rate_cell(case) in compared
        assert any(v["rate"] == pytest.approx(rate) and v["rate_name"] == figure.name for v in judged)
        # share: every line carries the figure (a pp line too), and a reader takes it as the rate
        assert lines[index]["figures"][figure.name] == pytest.approx(rate, rel=1e-5)
        assert lines[index]["rate_unit"] == figure.label
        peer = peers[index]
        assert peer is not None and peer.throughput == pytest.approx(rate, rel=1e-5)
        # the site, and compare --published
        assert shown in site
        assert published[index][5] == shown
    assert "pp tokens/s (llama-bench)" in site and "2nd+ token rate (MLPerf Client)" in site
    assert "tg tokens/s (llama-bench)" in history


def test_mlperf_client_overall_figures_are_catalogued_and_in_json(runs: tuple[RunRecord, RunRecord]) -> None:
    a, _ = runs
    (overall,) = mlperf_client_overall(a.cases)
    (stored,) = record_view(a)["protocol_overall"]
    assert stored["mlperf_ttft_geomean_s"] == overall.ttft_s
    assert stored["mlperf_token_rate_geomean"] == overall.token_rate
    notes = "\n".join(generation_notes(a))
    assert format_seconds(overall.ttft_s) in notes and format_rate(overall.token_rate) in notes
    assert "`mlperf_ttft_geomean_s`" in markdown_table() and "`mlperf_token_rate_geomean`" in markdown_table()


def test_compare_judges_the_protocol_rate(runs: tuple[RunRecord, RunRecord]) -> None:
    a, b = runs
    groups = compare_runs([LabelledRun("A", a), LabelledRun("B", b)])
    pairs = [pair for group in groups for pair in group.pairs]
    pp = next(p for p in pairs if p.a.new_tokens == 1)  # no decode step: judged on its pp rate
    assert pp.verdict.ratio == pytest.approx(pp.b.throughput() / pp.a.throughput())
    assert pp.verdict.ratio == pytest.approx(0.5)


def test_a_llama_bench_pp_line_places_among_its_peers(runs: tuple[RunRecord, RunRecord],
                                                     tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    for machine in range(6):
        record = _record(f"peer-{machine}", 1 + 0.05 * machine)
        (folder / f"{machine}.jsonl").write_text(build_bundle([record], f"{machine + 1:032x}").text())
    a, _ = runs
    comparisons, loaded = compare_against([("mine", a)], [str(folder)], lambda message: None)
    assert not loaded.skipped, loaded.skipped  # no line left out as malformed
    verdicts = {(c.placement.mine.key, c.placement.verdict) for c in comparisons}
    assert len(comparisons) == len(a.cases)
    (pp,) = [c for c in comparisons if c.placement.mine.throughput == pytest.approx(a.cases[0].throughput(),
                                                                                   rel=1e-5)]
    assert pp.placement.machine_count == 6 and pp.placement.verdict != "too few peers", verdicts


def test_each_protocol_times_the_way_its_peer_observes_a_token() -> None:
    assert reads_each_token("llama-bench", 128) and not reads_each_token("llama-bench", 1)
    assert reads_each_token("mlperf-client", 256) and not reads_each_token("gpt-fast", 200)
    assert not reads_each_token("", 128)
    assert (reported_figure("llama-bench", 1), reported_figure("llama-bench", 63)) == ("pp", "tg")
    assert reported_figure("vllm", 8) is None  # a line from a newer accelbench: no protocol rate
    clocks = {t.name: t.clock for name in ("llama-bench", "gpt-fast", "mlperf-client")
              for t in fitted_tests(name, 8192)}
    assert clocks["tg128"] == clocks["creative writing"] == PER_TOKEN_READ
    assert clocks["pp512"] == clocks["gpt-fast"] == DEVICE_CADENCE
    for name in ("tg_tokens_per_s", "mlperf_token_rate"):
        assert "per-token read" in BY_NAME[name].method
    assert "device cadence" in BY_NAME["gpt_fast_tokens_per_s"].method


def test_a_real_llama_bench_run_reads_each_tg_token_and_shows_one_figure(cli, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = cli("run", "gpt2", "--mode", "generate", "--protocol", "llama-bench", "--size", "tiny",
               "--device", "cpu", "--steps", "2", "--warmup", "0", "-o", str(out))
    assert done.returncode == 0, done.stderr
    record = RunRecord.from_dict(json.loads(out.read_text()))
    pp, tg = record.cases
    assert pp.generation and pp.generation.protocol and tg.generation and tg.generation.protocol
    assert (pp.generation.streamed, tg.generation.streamed) == (False, True)
    assert tg.generation.timing_method == STREAMED
    assert (pp.generation.protocol.clock, tg.generation.protocol.clock) == (DEVICE_CADENCE, PER_TOKEN_READ)
    flat = " ".join(done.stdout.split())
    for case in (pp, tg):
        assert f"{format_rate(case.throughput())}*" in flat
    # Issue 36: a generation-only run's table names the run; a pp case (one token) has no ITL, no
    # decode rate and no decode bandwidth: "—", said under the table (not "windows"); what one
    # decode step reads, its bandwidth, the share and the bound are a column each.
    assert f"accelbench run {record.run_id}" in flat
    cells = [dict(zip(GENERATION_COLUMNS, row, strict=True)) for row in generation_rows(record)]
    assert cells[0]["ITL p50/p99"] == cells[0]["decode tok/s"] == "—" and "windows" not in flat
    assert "—: the case makes one token" in flat
    assert cells[1]["read/token"].endswith("KiB") and cells[1]["decode bandwidth"].endswith("B/s")
    assert cells[1]["% bandwidth"].endswith("%") and cells[1]["bound"] in ("overhead", "bw-bound")
    history = cli("history", "--workload", "gpt2", "--mode", "generate", "--json")
    assert history.returncode == 0, history.stderr
    stored = sorted(p["throughput"] for p in json.loads(history.stdout)["timeline"])
    assert stored == pytest.approx(sorted(c.throughput() for c in (pp, tg)))


def test_end_to_end_latency_and_output_tokens_are_the_field_s(runs: tuple[RunRecord, RunRecord]) -> None:
    a, _ = runs
    tg = a.cases[1]
    assert tg.generation is not None and tg.generation.rounds is not None
    e2e = sorted(r.ttft_s + r.decode_s for r in tg.generation.rounds)[2]
    figures = case_figures(tg)
    assert figures["e2e_s"] == pytest.approx(e2e)
    assert figures["output_tokens_per_s"] == pytest.approx(1 * tg.new_tokens / e2e)
    table = _text(generation_table(a))
    assert "batch tok/s" in table and "total" not in table.split("\n")[1]
    assert format_seconds(e2e) in table


def test_an_old_history_protocol_row_takes_the_peer_s_rate(runs: tuple[RunRecord, RunRecord],
                                                          tmp_path: Path) -> None:
    """A history written before layout 6 stored accelbench's median (or nothing, for pp)."""
    a, _ = runs
    path = tmp_path / "h.sqlite"
    with HistoryDB(path) as db:
        db.add_record(a)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE cases SET throughput = NULL")
    conn.execute("UPDATE schema_version SET version = 5")
    conn.commit()
    conn.close()
    with HistoryDB(path) as db:
        stored = sorted(p.throughput for p in db.timeline("llama-1b", "generate"))
    assert stored == pytest.approx(sorted(c.throughput() for c in a.cases))


def test_a_result_written_before_the_new_figures_still_renders(runs: tuple[RunRecord, RunRecord]) -> None:
    a, _ = runs
    data = json.loads(json.dumps(a.to_dict()))
    for case in data["cases"]:
        for name in ("e2e_s", "output_tokens_per_s"):
            case["generation"].pop(name)
        case["generation"]["protocol"].pop("clock")
    old = RunRecord.from_dict(data)
    table = _text(generation_table(old))
    assert f"{format_rate(old.cases[1].throughput())}*" in table
    assert case_figures(old.cases[1])["e2e_s"] is None


@pytest.mark.parametrize(("protocol", "test_name"), [("llama-bench", "pp512"), ("llama-bench", "tg128"),
                                                      ("gpt-fast", "gpt-fast"),
                                                      ("mlperf-client", "creative writing")])
def test_repeat_s_rate_is_the_protocol_s_figure_and_its_interval_is_across_processes(
        protocol: str, test_name: str) -> None:
    """--repeat 2: the headline is the protocol's figure over both processes' repetitions (as
    llama-bench -r 10 reports the mean of ten), not the first process's; its interval is the
    spread between the two processes' own figures, not the pooled rounds'."""
    one, two = _case(protocol, test_name, 1.0), _case(protocol, test_name, 1.6)
    merged = merge_repeats([one, two])
    section = merged.generation.protocol if merged.generation else None
    assert section is not None
    rates = [one.throughput(), two.throughput()]
    assert [r.protocol_rate for r in merged.repeats] == rates
    if section.figure == "category":  # 1 / the mean over every iteration of the time per token
        assert section.rounds == 6 and merged.throughput() == pytest.approx(2 / sum(1 / r for r in rates))
    else:  # the mean ± sd over every repetition (equal counts: the mean of the processes' means)
        both = one.generation.protocol.samples_tokens_per_s + two.generation.protocol.samples_tokens_per_s
        assert section.rounds == 10 and section.samples_tokens_per_s == both
        assert merged.throughput() == pytest.approx(sum(rates) / 2)
        assert section.tokens_per_s_sd == pytest.approx(statistics.stdev(both))
    assert merged.throughput_ci() == pytest.approx(geometric_ci(rates))
    assert process_step_times(merged) == pytest.approx([1 / r for r in rates])  # what compare judges
    written = RunRecord("r", "2026-11-27", "0", cases=[merged]).to_dict()
    stored = RunRecord.from_dict(json.loads(json.dumps(written)))
    (again,) = stored.cases
    assert again.throughput() == merged.throughput() and again.throughput_ci() == merged.throughput_ci()


def test_a_real_mlperf_client_run_s_overall_is_stored_once_and_read_alike(cli, tmp_path: Path) -> None:
    """MLPerf Client's overall figures (the geometric means over its categories) are computed once
    when the run's cases are in and stored in the record; the run's lines, --json, compare (table
    and --json) and export read the stored figures: a file whose stored figures are changed shows
    the changed ones on every surface (none recomputes them from the cases)."""
    out = tmp_path / "run.json"
    done = cli("run", "gpt2", "--mode", "generate", "--protocol", "mlperf-client", "--size", "tiny",
               "--device", "cpu", "--steps", "2", "--warmup", "0", "-o", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    (stored,) = data["protocol_overall"]
    record = RunRecord.from_dict(data)
    (computed,) = mlperf_client_overall(record.cases)
    assert stored == computed.to_dict() and not stored["missing"] and len(stored["categories"]) == 5
    assert stored["mlperf_token_rate_geomean"] == pytest.approx(geometric_mean(
        [c.throughput() for c in record.cases]))
    flat = " ".join(done.stdout.split())
    assert (f"TTFT {format_seconds(stored['mlperf_ttft_geomean_s'])}, 2nd+ token rate "
            f"{format_rate(stored['mlperf_token_rate_geomean'])} tokens/s") in flat
    # Figures only a stored value could give: every surface must show these.
    stored.update(mlperf_ttft_geomean_s=0.0777, mlperf_token_rate_geomean=12345.6)
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(data))
    again = RunRecord.from_dict(json.loads(changed.read_text()))
    assert again.to_dict()["protocol_overall"] == [stored]
    assert record_view(again)["protocol_overall"] == [stored]
    notes = " ".join("\n".join(generation_notes(again)).split())
    assert "TTFT 77.7 ms, 2nd+ token rate 12,346 tokens/s" in notes
    assert "| gpt2 cpu fp32 | 5 | 77.7 ms | 12,346 tokens/s |" in export(again, "markdown")
    assert json.loads(export(again, "json"))["protocol_overall"] == [stored]
    compared = cli("compare", str(out), str(changed))
    assert compared.returncode == 0, compared.stderr
    rows = [" ".join(line.split()) for line in compared.stdout.splitlines()]
    assert "changed.json gpt2 cpu fp32 5 77.7 ms 12,346 tokens/s" in rows
    shown = format_rate(computed.token_rate)
    assert f"run.json gpt2 cpu fp32 5 {format_seconds(computed.ttft_s)} {shown} tokens/s" in rows
    view = json.loads(cli("compare", str(out), str(changed), "--json").stdout)["protocol_overall"]
    assert view == [{"run": "run.json", **computed.to_dict()}, {"run": "changed.json", **stored}]
    published = " ".join(_text(published_generation([("changed.json", again)])).split())  # --published
    assert "changed.json gpt2 cpu fp32 5 77.7 ms 12,346 tokens/s" in published
    labelled = [("changed.json", again)]
    assert published_view(labelled)["protocol_overall"] == [{"run": "changed.json", **stored}]


def test_a_real_mlperf_client_run_s_overall_reads_alike_in_history_share_and_the_site(
        cli, inline_cli, tmp_path: Path) -> None:
    """The surfaces the stored overall figures had not reached: ``history`` (its table and
    --json), ``share`` (every line of the group, signed where cryptography is installed) and
    ``site`` (the work's page) show the numbers ``run --json`` stored, for a real run."""
    done = cli("run", "gpt2", "--mode", "generate", "--protocol", "mlperf-client", "--size", "tiny",
               "--device", "cpu", "--steps", "2", "--warmup", "0", "--json")
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    (stored,) = view["protocol_overall"]
    ttft, rate = stored["mlperf_ttft_geomean_s"], stored["mlperf_token_rate_geomean"]
    assert ttft and rate and not stored["missing"]
    # history: the --json list and the table under the runs
    (run,) = json.loads(inline_cli("history", "--json").stdout)["runs"]
    assert run["run_id"] == view["run_id"] and run["protocol_overall"] == [stored]
    listed = " ".join(inline_cli("history").stdout.split())
    assert (f"gpt2 cpu fp32 {len(stored['categories'])} {format_seconds(ttft)} {format_rate(rate)} "
            "tokens/s") in listed
    # share: each line of the group carries the stored figures (6 significant digits, as every figure)
    bundle = tmp_path / "run.jsonl"
    assert inline_cli("share", view["run_id"], "-o", str(bundle), "--quiet").returncode == 0
    sections = [json.loads(line)["overall"] for line in bundle.read_text().splitlines()]
    assert len(sections) == len(view["cases"]) and all(s == sections[0] for s in sections)
    assert sections[0]["mlperf_ttft_geomean_s"] == pytest.approx(ttft, rel=1e-5)
    assert sections[0]["mlperf_token_rate_geomean"] == pytest.approx(rate, rel=1e-5)
    # the site: the work's page, in the cells compare uses
    site = inline_cli("site", str(bundle), "-o", str(tmp_path / "site"), "--quiet")
    assert site.returncode == 0, site.stderr
    page = " ".join(re.sub(r"<[^>]+>", " ", "".join(
        path.read_text() for path in (tmp_path / "site").glob("bench-gpt2-*.html"))).split())
    shared_ttft, shared_rate = sections[0]["mlperf_ttft_geomean_s"], sections[0]["mlperf_token_rate_geomean"]
    assert (f"{len(stored['categories'])} {format_seconds(shared_ttft)} {format_rate(shared_rate)} "
            "tokens/s") in page
