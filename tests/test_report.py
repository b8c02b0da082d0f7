"""The HTML report: self-contained, every result string escaped, optional sections, real browser."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest_report import HOSTILE_ERROR, HOSTILE_MACHINE, case, cpu_and_cuda, record

from accelbench.cli import main
from accelbench.compare import LabelledRun, compare_runs
from accelbench.render.html import el, render_report
from accelbench.store.history import HistoryDB
from accelbench.store.jsonfile import save_record

CHROMIUM = Path("/usr/bin/chromium")


class Elements(HTMLParser):
    """Every start tag with its attributes, and all text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(text: str) -> Elements:
    parser = Elements()
    parser.feed(text)
    return parser


def _hostile_runs() -> list[LabelledRun]:
    hostile = cpu_and_cuda("hostile1", machine=HOSTILE_MACHINE)
    hostile.cases.append(case(workload="mnist", device="cuda:0", mode="eval", status="crashed",
                              step_times=[], error=HOSTILE_ERROR, batch_size=1000))
    parity = case(workload="vae", device="cuda:0", extra={"parity": {
        "steps": [1, 2, 3, 4], "candidate": [1.0, 0.8, None, None], "reference": [1.0, 0.7, 0.5, 0.4],
        "verdict": "non-finite", "first_bad_step": 3, "bad_tensor": "<decoder.weight>"}})
    failed = case(workload="vae", device="mps", status="unsupported", step_times=[],
                  extra={"parity": {"verdict": "failed", "error": HOSTILE_ERROR}})
    hostile.cases += [parity, failed]
    probe = record("probe1", [case(device="cuda:0", extra={"probe": {
        "torch.compile": {"status": "fails", "detail": "RuntimeError: <b>Unsupported</b> device"},
        "autocast": {"status": "works", "detail": ""}}})], machine="gpu-box", kind="probe")
    other = cpu_and_cuda("other2", machine="alpha", cpu=0.12, cuda=0.03)
    return [LabelledRun(r.run_id, r) for r in (hostile, other, probe)]


@pytest.fixture(scope="module")
def report_html() -> str:
    runs = _hostile_runs()
    return render_report(runs, compare_runs(runs, with_reference=True), title="test <report>",
                         generated_at="now", published=True)


def test_every_result_string_is_escaped(report_html: str) -> None:
    parsed = _parse(report_html)
    assert [tag for tag, _ in parsed.tags if tag == "script"] == []
    text = "".join(parsed.text)
    assert HOSTILE_MACHINE in text and HOSTILE_ERROR in text and "test <report>" in text
    for tag, attrs in parsed.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if tag == "img":
            assert (attrs.get("src") or "").startswith("data:image/png;base64,")


def test_report_is_self_contained(report_html: str) -> None:
    parsed = _parse(report_html)
    for _, attrs in parsed.tags:
        for name in ("src", "href"):
            value = attrs.get(name) or ""
            assert not value.startswith(("http:", "https:", "//")), value
    assert "http://" not in report_html and "https://" not in report_html
    assert any(tag == "meta" and a.get("http-equiv") == "Content-Security-Policy" for tag, a in parsed.tags)


def test_sections_present_when_data_is(report_html: str) -> None:
    text = "".join(_parse(report_html).text)
    for heading in ("Environment", "Comparison", "Figures", "Parity", "Feature matrix"):
        assert heading in text
    assert "candidate loss is NaN from step 3" in text and "bad tensor: <decoder.weight>" in text
    assert "verdict: failed; error: " + HOSTILE_ERROR in text  # a check that never ran: no curves
    assert "RuntimeError: <b>Unsupported</b> device" in text  # the probe detail, as text
    assert "Unsupported device type: mps" in text and "up to 20x" in text
    assert "published, not measured here" in text and "not comparable" not in text.split("Figures")[1]
    assert report_html.count("<img ") >= 5  # throughput, speedup, 2 step-time plots, parity


def test_optional_sections_absent_without_data() -> None:
    runs = [LabelledRun("plain", cpu_and_cuda("plain"))]
    text = render_report(runs, compare_runs(runs))
    assert "Parity" not in text and "Feature matrix" not in text and "History" not in text


def test_malformed_parity_data_is_a_note_not_a_crash() -> None:
    runs = [LabelledRun("m", record("m", [case(extra={"parity": {"steps": [1], "candidate": "x"}})]))]
    assert "parity data is malformed" in render_report(runs, compare_runs(runs))


def test_el_escapes_text_and_attributes() -> None:
    assert el("td", "<i>", title='"x" onclick=1') == '<td title="&quot;x&quot; onclick=1">&lt;i&gt;</td>'


def test_report_command_from_history(capsys, tmp_path: Path) -> None:
    with HistoryDB() as db:
        db.add_record(cpu_and_cuda("histone", cpu=0.1, created_at="2025-01-01T00:00:00+00:00"))
        db.add_record(cpu_and_cuda("histtwo", cpu=0.09, created_at="2025-02-01T00:00:00+00:00"))
    save_record(cpu_and_cuda("file1", machine="elsewhere"), tmp_path / "f.json")
    out = tmp_path / "r.html"
    assert main(["report", "-o", str(out)]) == 0  # default: the most recent runs in the history
    text = out.read_text()
    assert "histone" in text and "histtwo" in text and "History" in text
    assert main(["report", "histt", str(tmp_path / "f.json"), "-o", str(out), "--reference"]) == 0
    assert "elsewhere" in out.read_text() and "histone" not in out.read_text()


def _browser_or_skip():
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no system chromium at {CHROMIUM} (apt-get install chromium)")
    return sync_api


def test_report_in_a_real_browser(tmp_path: Path, report_html: str) -> None:
    sync_api = _browser_or_skip()
    path = tmp_path / "report.html"
    path.write_text(report_html, encoding="utf-8")
    problems: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(path.as_uri(), wait_until="load")
            assert problems == []
            assert page.evaluate("typeof window.__pwned") == "undefined"
            assert page.locator("table").count() >= 5
            sizes = page.evaluate("""[...document.querySelectorAll('img, svg')].map(e => [
                e.getBoundingClientRect().width, e.getBoundingClientRect().height, e.naturalWidth || 1])""")
            assert len(sizes) >= 5 and all(w > 0 and h > 0 and n > 0 for w, h, n in sizes)
            body = page.inner_text("body")
            assert HOSTILE_MACHINE in body and HOSTILE_ERROR in body
        finally:
            browser.close()
