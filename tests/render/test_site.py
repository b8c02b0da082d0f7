"""``accelbench site``: static pages per workload/mode/precision and per device model, published
references marked, every bundle string escaped; opened in a real headless browser."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest_share import EPYC_MODEL, environment, result, run, write_bundle, write_peer_bundles

from accelbench.compare.peers import PeerResult
from accelbench.render.site import render_site
from accelbench.sharing.sources import load_peers

CHROMIUM = Path("/usr/bin/chromium")
HOSTILE = "<script>window.__pwned=1</script>"
# The comparability key in KEY_FIELDS order (generation fields last: prompt and new tokens, 0 here,
# not streamed).
KEY = ("mnist", 1, "train", 64, "fp32", "", False, "synthetic", "published", 0, 0, False, "")


@pytest.fixture(scope="module")
def site_peers(tmp_path_factory: pytest.TempPathFactory) -> list[PeerResult]:
    folder = write_peer_bundles(tmp_path_factory.mktemp("site") / "bundles")
    # The published mnist configuration (real data) on CPUs: the published M1 and P100 join it.
    real = [run(f"real{i:04d}", [result(EPYC_MODEL, 1400.0 + i, seed=i, data="real")],
                environment("cpu", EPYC_MODEL)) for i in range(5)]
    write_bundle(folder / "real.jsonl", real)
    peers = load_peers([str(folder)], print).peers
    # Strings no loader would let through, to prove the renderer escapes on its own.
    hostile_settings = {"torch": "<img src=x onerror=window.__pwned=2>"}
    return peers + [PeerResult(KEY, "cpu", HOSTILE, 100.0 + i, hostile_settings, machine_id=f"h{i}")
                    for i in range(2)]


def test_pages_per_bench_and_per_device_model(site_peers: list[PeerResult]) -> None:
    pages = render_site(site_peers, "now")
    bench = [name for name in pages if name.startswith("bench-")]
    devices = [name for name in pages if name.startswith("device-")]
    assert "index.html" in pages and len(bench) == 1 and len(devices) == 5
    index = pages["index.html"]
    assert "40 shared results from 36 machines and 5 device models" in index
    page = pages[bench[0]]
    assert page.count("<h2>") == 2  # the synthetic and the real-data configuration
    assert "Apple M1 (MPS) (published)" in page and 'class="published"' in page
    assert "blog post" in page  # the source is cited


def test_every_bundle_string_is_escaped(site_peers: list[PeerResult]) -> None:
    for name, page in render_site(site_peers, "now").items():
        assert "<script" not in page and "<img" not in page, name
        if name.startswith("bench-"):
            assert 'href="device-' in page  # device models link to their pages


def _browser_or_skip():
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no system chromium at {CHROMIUM} (apt-get install chromium)")
    return sync_api


def test_the_site_in_a_real_browser(tmp_path: Path, site_peers: list[PeerResult], inline_cli) -> None:
    sync_api = _browser_or_skip()
    site = tmp_path / "site"
    site.mkdir()
    for name, text in render_site(site_peers, "now").items():
        (site / name).write_text(text, encoding="utf-8")
    problems: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on("request", lambda request: requests.append(request.url))
            page.goto((site / "index.html").as_uri(), wait_until="load")
            assert page.locator("table tbody tr").count() == 1
            page.click("text=mnist")
            assert page.title() == "mnist · train · fp32"
            # The M1 and the P100, each with its CPU: four published figures of the real-data work.
            assert page.locator("tr.published").count() == 4
            published = page.locator("tr.published").first.inner_text()
            assert "(published)" in published and "blog post" in published
            assert HOSTILE in page.inner_text("body")  # shown as text
            page.click(f"text={EPYC_MODEL}")
            assert page.title() == EPYC_MODEL
            assert "threads" in page.inner_text("body") and page.locator("table").count() == 2
            page.goto((site / "index.html").as_uri(), wait_until="load")
            for name in sorted(p.name for p in site.glob("device-*.html")):
                page.goto((site / name).as_uri(), wait_until="load")
            assert page.evaluate("typeof window.__pwned") == "undefined"
            assert problems == []
            assert all(url.startswith("file://") for url in requests)  # nothing from the network
        finally:
            browser.close()


def test_site_command_writes_the_pages(tmp_path: Path, inline_cli) -> None:
    folder = write_peer_bundles(tmp_path / "bundles")
    (folder / "broken.jsonl").write_text("{broken\n")
    done = inline_cli("site", str(folder), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "broken.jsonl is not an accelbench bundle: none of its 1 line(s) is a bundle line" in done.stderr
    assert "read 33 shared result(s) from 1 source(s); skipped 1 line(s) that are not" in done.stderr
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert "index.html" in written and len(written) == 1 + 1 + 4
