"""Issue 26 item 1: one figure, one value. A generation case read 303 decode tokens/s in ``run``
and 1,097 in ``history`` and ``compare`` (two statistics under one name), and compare's "vs"
ratio was a third statistic (0.30x between two identical runs whose medians were 0.339 and
0.438 s). These tests hold every surface to the catalogue's one figure."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

from accelbench.compare import LabelledRun, compare_cases, compare_runs
from accelbench.measure.generation.rounds import GenerationFigures, GenerationRound
from accelbench.render.export import to_csv
from accelbench.render.format import format_rate
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import FIGURES, case_figures, headline, markdown_table
from accelbench.results.generation import Generation
from accelbench.store.history import HistoryDB


def _generation_case(token_s: float = 0.001, decode_extra: float = 0.003) -> CaseResult:
    """A generation case whose per-token gaps (1 ms) and whole decode (N - 1 gaps plus 3 ms of
    per-round overhead) give different rates: the old ``history`` read batch / median gap."""
    rounds = tuple(GenerationRound(0.002 + i * 1e-4, 7 * token_s + decode_extra + i * 1e-4,
                                   (token_s,) * 7) for i in range(5))
    figures = GenerationFigures(batch_size=2, prompt_len=8, new_tokens=8, timing_method="host",
                                rounds=rounds, warmup_rounds=1, kv_cache_bytes=1,
                                weight_bytes_per_step=1000, cache_bytes_per_step=10)
    return CaseResult(workload="nanogpt-char", mode="generate", device="cpu", batch_size=2,
                      prompt_len=8, new_tokens=8, size="tiny",
                      step_times=[t for r in rounds for t in r.token_times_s],
                      generation=Generation.from_dict(figures.to_dict()))


def test_a_generation_case_has_one_decode_rate() -> None:
    case = _generation_case()
    assert case.generation is not None and case.generation.rounds is not None
    stored = case.generation.decode_tokens_per_s_total
    # TPOT = the median round's decode time / (N - 1); the rate over the batch is B / TPOT.
    tpot = sorted(r.decode_s / 7 for r in case.generation.rounds)[2]
    assert stored == pytest.approx(2 / tpot)
    assert case.throughput() == stored  # what history, compare, sweep and bundles read
    assert case_figures(case)["decode_tokens_per_s_total"] == stored
    assert case.to_dict()["derived"]["figures"]["decode_tokens_per_s_total"] == stored
    # the old definition (batch / median per-token time) is a different number: 2,000/s here
    assert abs(2 / 0.001 - stored) / stored > 0.3
    low, high = case.throughput_ci()
    assert low <= stored <= high


def test_history_export_and_compare_read_the_stored_generation_rate(tmp_path: Path) -> None:
    case = _generation_case()
    record = RunRecord("gen1", "2026-11-26T00:00:00+00:00", "0.1.0", cases=[case],
                       environment={"machine": {"hostname": "h"}})
    assert case.generation is not None
    stored = case.generation.decode_tokens_per_s_total
    with HistoryDB(tmp_path / "h.sqlite") as db:
        db.add_record(record)
        (point,) = db.timeline("nanogpt-char", "generate")
        again = db.get("gen1")
    assert point.throughput == pytest.approx(stored)
    assert again.cases[0].throughput() == pytest.approx(stored)
    row = next(csv.DictReader(io.StringIO(to_csv(record))))
    assert float(row["rate"]) == pytest.approx(stored)
    assert float(row["decode_tokens_per_s_total"]) == pytest.approx(stored)
    assert (row["rate_unit"], row["rate_name"]) == ("decode tokens/s", "decode_tokens_per_s_total")


def test_an_old_history_generation_row_is_migrated_to_the_table_figure(tmp_path: Path) -> None:
    """A history written before layout 5 stored batch / the median gap for a generation row."""
    case = _generation_case()
    record = RunRecord("gen1", "2026-11-26T00:00:00+00:00", "0.1.0", cases=[case])
    path = tmp_path / "h.sqlite"
    with HistoryDB(path) as db:
        db.add_record(record)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE cases SET throughput = 2000.0")
    conn.execute("UPDATE schema_version SET version = 4")
    conn.commit()
    conn.close()
    with HistoryDB(path) as db:
        (point,) = db.timeline("nanogpt-char", "generate")
    assert case.generation is not None
    assert point.throughput == pytest.approx(case.generation.decode_tokens_per_s_total)


def _train_case(steps: list[float]) -> CaseResult:
    return CaseResult(workload="mnist", mode="train", device="cpu", batch_size=8, size="tiny",
                      step_times=steps)


def test_compare_shows_the_ratio_of_the_rows_rates() -> None:
    """Two single-process runs whose lower tails differ 3x while their medians differ 1.3x:
    "vs" is the medians' ratio (the rows' samples/s), and one process a side can't tell."""
    a = _train_case([0.1, 0.1, 0.339, 0.34, 0.35, 0.339, 0.36, 0.339, 0.338, 0.34])
    b = _train_case([0.3, 0.31, 0.438, 0.44, 0.45, 0.438, 0.46, 0.438, 0.437, 0.44])
    verdict = compare_cases(a, b)
    assert verdict.ratio == pytest.approx(b.throughput() / a.throughput())
    assert verdict.ratio == pytest.approx(0.3395 / 0.438, rel=0.01)
    assert verdict.verdict == "can't tell"


def test_compare_json_holds_the_values_the_table_shows(cli, tmp_path: Path) -> None:
    a, b = _train_case([0.2] * 6 + [0.25] * 4), _train_case([0.3] * 6 + [0.2] * 4)
    paths = []
    for name, case in (("a", a), ("b", b)):
        record = RunRecord(name, "2026-11-26T00:00:00+00:00", "0.1.0", cases=[case])
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(record.to_dict()))
        paths.append(str(path))
    done = cli("compare", *paths, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    (group,) = data["comparisons"]
    (pair,) = group["pairs"]
    assert pair["verdict"]["ratio"] == pytest.approx(b.throughput() / a.throughput())
    assert pair["a_case"]["rate"] == pytest.approx(a.throughput())
    assert pair["b_case"]["figures"]["samples_per_s"] == pytest.approx(b.throughput())
    table = cli("compare", *paths)
    assert f"{pair['verdict']['ratio']:.2f}x" in table.stdout
    runs = [LabelledRun(n, RunRecord(n, "t", "0", cases=[c])) for n, c in (("a", a), ("b", b))]
    assert compare_runs(runs)[0].pairs[0].verdict.ratio == pytest.approx(pair["verdict"]["ratio"])


def test_history_json_holds_the_timeline_figure(cli, tmp_path: Path) -> None:
    case = _generation_case()
    db = tmp_path / "h.sqlite"
    with HistoryDB(db) as store:
        store.add_record(RunRecord("gen1", "2026-11-26T00:00:00+00:00", "0.1.0", cases=[case]))
    done = cli("history", "--db", str(db), "--workload", "nanogpt-char", "--mode", "generate", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    (point,) = data["timeline"]
    assert point["throughput"] == pytest.approx(case.throughput())
    assert point["rate_unit"] == "decode tokens/s" and point["key"]["prompt_len"] == 8
    table = cli("history", "--db", str(db), "--workload", "nanogpt-char", "--mode", "generate")
    assert format_rate(case.throughput()) in table.stdout


def test_the_catalogue_defines_each_figure_once_and_the_docs_list_it() -> None:
    names = [f.name for f in FIGURES]
    assert len(names) == len(set(names))
    assert headline("generate").name == "decode_tokens_per_s_total"
    assert headline("train").name == headline("eval").name == "samples_per_s"
    page = (Path(__file__).resolve().parents[2] / "docs" / "figures.md").read_text()
    missing = [name for name in names if f"`{name}`" not in page]
    assert not missing, f"docs/figures.md lacks {missing}"
    assert markdown_table() in page, "docs/figures.md is stale: run scripts/figure_catalogue.py"


def test_a_streamed_generation_is_other_work() -> None:
    """Issue 26 item 19: a generation that reads each token to the host (--stream) is not
    compared with one timed at the device's cadence: ``streamed`` is a key field."""
    from accelbench.results.key import config_label, incomparable_reasons

    plain, streamed = _generation_case(), _generation_case()
    streamed.streamed = True
    assert incomparable_reasons(plain, streamed) == ["streamed False vs True"]
    assert compare_cases(plain, streamed).verdict == "not comparable"
    assert "streamed" in config_label(streamed) and "streamed" not in config_label(plain)
