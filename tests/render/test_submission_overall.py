"""Issue 33, one truth for each protocol's figure: what ``share --dry-run`` (and ``share --push
... --dry-run``'s confirmation) prints shows the figures across cases each group of lines carries
(MLPerf Client's overall geometric means, as the run's record stores them): a row per group, in
the cells compare's table of them uses, read from the lines the bundle would hold (the same as
``--dry-run --json`` prints). A real run (subprocess), the real ``share`` command; one copy's
stored figures are planted (a table that recomputed them from the categories would show others),
one copy was written before they were stored (no key: ``stored_overall`` computes them once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import rendered_text
from conftest_overall import planted_copy, real_mlperf_run, stored, unstored_copy
from conftest_report import cpu_and_cuda

from accelbench.hub.push import submission
from accelbench.render.format import format_rate, format_seconds
from accelbench.render.submission import dry_run_renderable, overall_table
from accelbench.sharing.build import build_bundle

TITLE = "Figures across cases each group's lines carry (MLPerf Client's overall, as stored with its run)"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the real run's file, its planted copy, its copy without the stored key)."""
    folder = tmp_path_factory.mktemp("mlperf")
    run = real_mlperf_run(folder)
    return run, planted_copy(run, folder / "planted.json"), unstored_copy(run, folder / "unstored.json")


def _rows(stdout: str) -> list[str]:
    return [" ".join(line.split()) for line in stdout.splitlines()]


def test_the_dry_run_shows_each_group_s_stored_figures_once(cli, runs: tuple[Path, Path, Path]) -> None:
    run, planted, unstored = runs
    done = cli("share", str(run), str(planted), str(unstored), "--dry-run")
    assert done.returncode == 0, done.stderr
    rows = _rows(done.stdout)
    assert TITLE in rows
    table = rows[rows.index(TITLE) + 1:]
    assert table[0] == ("lines case categories TTFT (MLPerf Client, overall) 2nd+ token rate (MLPerf "
                        "Client, overall)")
    real = stored(run)
    categories = len(real["categories"])
    figures = (f"{format_seconds(real['mlperf_ttft_geomean_s'])} "
               f"{format_rate(real['mlperf_token_rate_geomean'])} tokens/s")
    # A row per group (each run's five category lines carry one), in the runs' order.
    assert table[2:5] == [f"{categories} gpt2 cpu fp32 {categories} {figures}",
                          f"{categories} gpt2 cpu fp32 {categories} 77.7 ms 12,346 tokens/s",
                          f"{categories} gpt2 cpu fp32 {categories} {figures}"]
    # The lines the table reads are the bundle's: --json prints them exactly.
    lines = cli("share", str(planted), "--dry-run", "--json")
    assert lines.returncode == 0, lines.stderr
    sections = [json.loads(text)["overall"] for text in lines.stdout.splitlines()]
    assert len(sections) == categories and all(s == sections[0] for s in sections)
    carried = sections[0]
    assert (carried["mlperf_ttft_geomean_s"], carried["mlperf_token_rate_geomean"]) == (0.0777, 12345.6)


def test_the_push_confirmation_shows_them_too(cli, runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    done = cli("share", str(runs[1]), "--push", str(tmp_path / "hub"), "--dry-run")
    assert done.returncode == 0, done.stderr
    rows = _rows(done.stdout)
    assert rows[rows.index(TITLE) + 3] == "5 gpt2 cpu fp32 5 77.7 ms 12,346 tokens/s"
    assert not (tmp_path / "hub").exists()  # a dry run sends nothing


def test_an_incomplete_group_is_shown_missing(cli, runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    data = json.loads(runs[0].read_text())
    data["cases"] = data["cases"][:4]  # a category missing: the group is shared as incomplete
    del data["protocol_overall"]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(data))
    done = cli("share", str(partial), "--dry-run")
    assert done.returncode == 0, done.stderr
    rows = _rows(done.stdout)
    # The lines carry the group as stored (incomplete): said as compare says it, with no figure.
    assert rows[rows.index(TITLE) + 3].startswith("4 gpt2 cpu fp32 missing: ")
    assert rows[rows.index(TITLE) + 3].endswith(" n/a n/a")


def test_lines_without_figures_across_cases_get_no_such_table() -> None:
    sub = submission(build_bundle([cpu_and_cuda("plain")], "a" * 32).text(), "a" * 32)
    assert sub.rows and overall_table(sub) is None
    assert TITLE not in " ".join(rendered_text(dry_run_renderable(sub)).split())
