"""Issue 30 (item F): the site's index shows each workload's best and median figures, with their
unit, and a small chart of its device models' medians, not only counts; the chart draws under the
page's policy (no script, nothing loaded) in a real browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest_share import write_peer_bundles

from accelbench.compare.collection import collect
from accelbench.compare.peers import PeerResult
from accelbench.render.format import format_rate
from accelbench.render.site import CHART_BARS, render_site
from accelbench.sharing.sources import load_peers

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> list[PeerResult]:
    return load_peers([str(write_peer_bundles(tmp_path_factory.mktemp("index") / "b"))], print).peers


def test_the_index_has_the_best_and_median_figures_and_a_chart(peers: list[PeerResult]) -> None:
    index = render_site(peers, "now")["index.html"]
    (summary,) = [s for s in collect(peers).keys.values() if s.measured]
    groups = sorted(summary.measured, key=lambda g: -g.median)
    best = max(groups, key=lambda g: g.best)
    assert f"{format_rate(best.best)} samples/s ({best.device_model})" in index
    assert f"{format_rate(groups[0].median)} samples/s ({groups[0].device_model})" in index
    bars = re.findall(r"<rect[^>]*><title>([^<]*)</title>", index)
    assert len(bars) == min(len(groups), CHART_BARS)
    assert bars[0].startswith(f"{groups[0].device_model}: median {format_rate(groups[0].median)}")
    widths = [float(w) for w in re.findall(r'<rect[^>]*width="([0-9.]+)"', index)]
    assert widths == sorted(widths, reverse=True) and widths[0] == 120.0  # the fastest is full


def test_the_chart_draws_in_a_real_browser(tmp_path: Path, peers: list[PeerResult]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no system chromium at {CHROMIUM}")
    for name, text in render_site(peers, "now").items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    problems: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.goto((tmp_path / "index.html").as_uri(), wait_until="load")
            boxes = [page.locator("svg rect").nth(i).bounding_box()
                     for i in range(page.locator("svg rect").count())]
            assert boxes and all(box is not None and box["width"] >= 1 and box["height"] == 8
                                 for box in boxes)
            assert "samples/s" in page.inner_text("table")
            assert problems == []
        finally:
            browser.close()
