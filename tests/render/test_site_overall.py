"""Issue 33, one truth for each protocol's figure: the site shows an MLPerf Client work's overall
figures (the geometric means over its categories, as each run stored them and its shared lines
carried them) in a small table beside its categories' sections, in the cells compare's table of
them uses; never recomputed from the category rows. Real bundles (the ``share`` code), the real
loader and the real site pages; the stored figures are planted ones no category could give."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from test_history_overall import planted

from accelbench.compare.collection import collect
from accelbench.render.format import format_rate, format_seconds
from accelbench.render.site import render_site, slug
from accelbench.results.key import KEY_FIELDS, comparability_key, config_label
from accelbench.results.protocol_summary import mlperf_client_overall, overall_key
from accelbench.sharing.build import build_bundle
from accelbench.sharing.sources import load_peers
from accelbench.store.jsonfile import save_record

BENCH = f"bench-{slug('llama-1b generate fp32')}.html"


def _cells(page: str) -> list[list[str]]:
    """Each table row's cells as text (tags dropped, spaces squeezed)."""
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S)
    return [[" ".join(re.sub(r"<[^>]+>", " ", cell).split())
             for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)] for row in rows]


def _site(tmp_path: Path, *records: Any) -> dict[str, str]:
    folder = tmp_path / "bundles"
    folder.mkdir()
    for index, record in enumerate(records):
        (folder / f"{index}.jsonl").write_text(build_bundle([record], f"{index + 1:032x}").text())
    return render_site(collect(load_peers([str(folder)], lambda message: None).peers))


def test_the_bench_page_shows_the_stored_figures_beside_the_categories(tmp_path: Path) -> None:
    record = planted()
    (stored,) = record.protocol_overall or []
    page = _site(tmp_path, record)[BENCH]
    case = next(c for c in record.cases if c.protocol == "mlperf-client")
    key = dict(zip(KEY_FIELDS, overall_key(comparability_key(case)), strict=True))
    heading = f"{config_label(key)}: overall"
    assert heading.startswith("fp32 tiny ") and "protocol:mlperf-client" in heading
    assert heading in page
    # After every category's section (the categories' sections come first), before the page's note.
    last_category = max(page.index(f"prompt {c.prompt_len} +{c.new_tokens}") for c in record.cases
                        if c.protocol == "mlperf-client")
    assert page.index(heading) > last_category
    table = page[page.index(heading):]
    rows = _cells(table[:table.index("</table>")])
    assert rows[0] == ["device model", "runs", "categories", "TTFT (MLPerf Client, overall)",
                       "2nd+ token rate (MLPerf Client, overall)"]
    assert rows[1] == ["Test CPU 9000", "1 (1 machine)", str(len(stored.categories)), "77.7 ms",
                       "12,346 tokens/s"]
    (computed,) = mlperf_client_overall(record.cases)  # what a recomputing page would show
    assert f"{format_rate(computed.token_rate)} tokens/s" not in table


def test_a_work_without_figures_across_cases_has_no_overall_table(tmp_path: Path) -> None:
    record = planted()
    record.cases = [c for c in record.cases if c.protocol != "mlperf-client"]
    record.protocol_overall = None
    pages = _site(tmp_path, record)
    assert BENCH in pages and "overall, across its categories" not in "".join(pages.values())


def test_the_site_command_writes_the_table_from_a_shared_run(inline_cli: Any, tmp_path: Path) -> None:
    """The commands end to end: a run stored by ``import``, shared by ``share``, put on a site by
    ``site``: its page shows the figures the run stored."""
    record = planted()
    assert inline_cli("import", str(save_record(record, tmp_path / "run.json"))).returncode == 0
    shared = inline_cli("share", "run-a", "-o", str(tmp_path / "run.jsonl"), "--quiet")
    assert shared.returncode == 0, shared.stderr
    done = inline_cli("site", str(tmp_path / "run.jsonl"), "-o", str(tmp_path / "site"), "--quiet")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "site" / BENCH).read_text()
    (stored,) = record.protocol_overall or []
    row = [cells for cells in _cells(page) if len(cells) == 5 and cells[4].endswith(" tokens/s")]
    assert row == [["Test CPU 9000", "1 (1 machine)", str(len(stored.categories)),
                    format_seconds(stored.ttft_s), f"{format_rate(stored.token_rate)} tokens/s"]]
