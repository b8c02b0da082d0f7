"""Issue 33, one truth for each protocol's figure: the HTML report (``accelbench report``) shows an
MLPerf Client run's overall figures (the geometric means over its categories) as each run's record
stores them, in the table compare prints of them. A real run (subprocess), the real ``report``
command; the HTML parsed, and opened in a real headless browser where one is installed. One copy's
stored figures are planted (a report that recomputed them from the categories would show others),
one copy was written before they were stored (no key: read as ``stored_overall`` computes them)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest_overall import planted_copy, real_mlperf_run, stored, unstored_copy
from conftest_report import cpu_and_cuda
from test_report import _browser_or_skip

from accelbench.compare import LabelledRun, compare_runs
from accelbench.render.format import format_rate, format_seconds
from accelbench.render.html import render_report

HEADING = "Protocol figures across cases"


class Tables(HTMLParser):
    """Each table's header cells and body rows (their cells' text), under the h2 it follows."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._heading = ""
        self._in: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h2":
            self._in, self._text = "h2", ""
        elif tag == "tr" and self._heading:
            self.tables.setdefault(self._heading, []).append([])
        elif tag in ("td", "th"):
            self._in, self._text = "cell", ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._heading, self._in = self._text.strip(), None
        elif tag in ("td", "th") and self._heading and self._in == "cell":
            self.tables[self._heading][-1].append(" ".join(self._text.split()))
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self._text += data


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the real run's file, its planted copy, its copy without the stored key)."""
    folder = tmp_path_factory.mktemp("mlperf")
    run = real_mlperf_run(folder)
    return run, planted_copy(run, folder / "planted.json"), unstored_copy(run, folder / "unstored.json")


def _report(cli, files: tuple[Path, ...], out: Path) -> str:
    done = cli("report", *map(str, files), "-o", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    return out.read_text(encoding="utf-8")


def test_the_report_shows_each_run_s_stored_overall_figures(cli, runs: tuple[Path, Path, Path],
                                                            tmp_path: Path) -> None:
    run, planted, unstored = runs
    page = _report(cli, runs, tmp_path / "report.html")
    parser = Tables()
    parser.feed(page)
    header, *rows = parser.tables[HEADING]
    assert header == ["run", "case", "categories", "TTFT (MLPerf Client, overall)",
                      "2nd+ token rate (MLPerf Client, overall)"]
    real = stored(run)
    figures = [format_seconds(real["mlperf_ttft_geomean_s"]),
               f"{format_rate(real['mlperf_token_rate_geomean'])} tokens/s"]
    categories = str(len(real["categories"]))
    assert rows == [["run.json", "gpt2 cpu fp32", categories, *figures],
                    ["planted.json", "gpt2 cpu fp32", categories, "77.7 ms", "12,346 tokens/s"],
                    # Written before they were stored: computed once from its cases, as a run does.
                    ["unstored.json", "gpt2 cpu fp32", categories, *figures]]
    # After the generation table, before the figures.
    headings = list(parser.tables)
    assert headings.index(HEADING) == headings.index("Generation: time to first token and tokens/s") + 1


def test_a_report_without_figures_across_cases_has_no_such_section() -> None:
    runs = [LabelledRun("plain", cpu_and_cuda("plain"))]
    assert HEADING not in render_report(runs, compare_runs(runs))


def test_the_overall_table_in_a_real_browser(cli, runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sync_api = _browser_or_skip()
    path = tmp_path / "report.html"
    _report(cli, runs[1:2], path)
    with sync_api.sync_playwright() as playwright:
        from test_report import CHROMIUM

        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(path.as_uri(), wait_until="load")
            table = page.locator(f"h2:text-is('{HEADING}') + table")
            assert table.count() == 1 and table.is_visible() and problems == []
            cells = table.locator("tbody tr").first.locator("td").all_inner_texts()
            assert [" ".join(c.split()) for c in cells] == ["planted.json", "gpt2 cpu fp32", "5", "77.7 ms",
                                                             "12,346 tokens/s"]
        finally:
            browser.close()
