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
from accelbench.results.key import KEY_DEFAULTS
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


def test_the_chart_draws_in_a_real_browser(tmp_path: Path, peers: list[PeerResult],
                                           lone_machines: list[PeerResult]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no system chromium at {CHROMIUM}")
    for name, text in render_site(peers, "now").items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    lone = tmp_path / "lone"
    lone.mkdir()
    for name, text in render_site(lone_machines, "now").items():
        (lone / name).write_text(text, encoding="utf-8")
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
            # Issue 36: a lone device model's bar is drawn against its unit's scale, not full
            # width; the index does not link to itself, and a bench page leads back to it.
            page.goto((lone / "index.html").as_uri(), wait_until="load")
            widths = page.evaluate("[...document.querySelectorAll('svg rect')].map(r => "
                                   "r.getBoundingClientRect().width)")
            assert widths == [pytest.approx(12.0), pytest.approx(120.0)]
            assert page.locator("nav a").count() == 0
            page.click("text=mnist")
            page.click("text=all results")
            assert page.title() == "accelbench results"
            assert problems == []
        finally:
            browser.close()


def _key(workload: str) -> tuple[object, ...]:
    return tuple({**KEY_DEFAULTS, "workload": workload, "mode": "train", "batch_size": 64}.values())


@pytest.fixture(scope="module")
def lone_machines() -> list[PeerResult]:
    """Issue 36: one machine per work, as a newcomer's first site is. The mnist machine shared two
    results (100 and 200 samples/s: its median, 150, is a figure no run produced)."""
    return [PeerResult(_key("mnist"), "cpu", "Test CPU", rate, {}, machine_id="m1", content_hash=f"h{rate}")
            for rate in (100.0, 200.0)] + [
        PeerResult(_key("vae"), "cpu", "Test CPU", 1500.0, {}, machine_id="m2", content_hash="v")]


def test_best_is_a_result_counts_agree_and_bars_share_a_scale(lone_machines: list[PeerResult]) -> None:
    pages = render_site(lone_machines, "now")
    index = pages["index.html"]
    assert "200 samples/s (Test CPU)" in index and "150 samples/s (Test CPU)" in index  # best, median
    (bench,) = [page for name, page in pages.items() if name.startswith("bench-mnist")]
    assert "2 (1 machine)" in bench and "1 machines" not in "".join(pages.values())
    assert "3 shared results from 2 machines and 1 device model;" in index
    widths = [float(w) for w in re.findall(r'<rect[^>]*width="([0-9.]+)"', index)]
    assert widths == [120.0 * 150 / 1500, 120.0]  # one scale per unit: mnist's bar is not full
    assert 'href="index.html"' not in index and 'href="index.html"' in bench
