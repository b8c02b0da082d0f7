"""The HTML report: self-contained, every result string escaped, optional sections, real browser."""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest_report import HOSTILE_ERROR, HOSTILE_MACHINE, case, cpu_and_cuda, record

from accelbench.cli import main
from accelbench.compare import LabelledRun, compare_runs
from accelbench.render import figures
from accelbench.render.html import render_report
from accelbench.results import Ceilings, DeviceProbe, Parity, ProbeCell, Profile, ProfileFigures
from accelbench.results.generation import ProtocolSection
from accelbench.store.history import HistoryDB, TimelinePoint
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
    parity = case(workload="vae", device="cuda:0", parity=Parity(
        "non-finite", steps=[1, 2, 3, 4], candidate=[1.0, 0.8, None, None],
        reference=[1.0, 0.7, 0.5, 0.4], first_bad_step=3, bad_tensor="<decoder.weight>"))
    failed = case(workload="vae", device="mps", status="unsupported", step_times=[],
                  parity=Parity("failed", error=HOSTILE_ERROR))
    hostile.cases += [parity, failed]
    probe = record("probe1", [], machine="gpu-box", kind="probe")
    probe.probes = [DeviceProbe("cuda:0", cells={
        "torch.compile": ProbeCell("fails", "RuntimeError: <b>Unsupported</b> device"),
        "autocast": ProbeCell("works")})]
    other = cpu_and_cuda("other2", machine="alpha", cpu=0.12, cuda=0.03)
    # A second workload two orders of magnitude faster per sample, and a profiled case.
    other.cases += [case(workload="vae", batch_size=128, median=0.004, seed=4),
                    case(workload="vae", device="cuda:0", batch_size=128, median=0.0006, seed=5,
                         profile=PROFILE)]
    return [LabelledRun(r.run_id, r) for r in (hostile, other, probe)]


#: A launch-bound profile, as --profile stores it (figures of tests/data/profiles/cuda_launch_bound.json).
PROFILE = Profile(
    ProfileFigures(steps=4, source="device", step_s=4.29e-4, busy_fraction=0.2006, kernels_per_step=20,
                   median_kernel_s=4e-6,
                   top_ops=[("gemv2T_kernel_val", 4e-5), ("at::native::vectorized_elementwise_kernel", 4e-5)],
                   allocated_bytes_per_step=2_113_536, parameter_bytes=1_000_000),
    Ceilings(memory_bandwidth_bytes_per_s=3.35e12, launch_latency_s=4e-6))


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
        for value in attrs.values():  # no attribute points anywhere: public addresses are text
            assert "http:" not in (value or "") and "https:" not in (value or ""), value
    assert not any(tag in ("a", "link", "script", "iframe") for tag, _ in parsed.tags)
    assert any(tag == "meta" and a.get("http-equiv") == "Content-Security-Policy" for tag, a in parsed.tags)


def test_published_sources_are_named_by_title_and_address(report_html: str) -> None:
    text = "".join(_parse(report_html).text)
    assert "Introducing Accelerated PyTorch Training on Mac" in text
    assert "https://pytorch.org/blog/introducing-accelerated-pytorch-training-on-mac/" in text
    assert "Apple M1 and M2 performance for training SSL models" in text
    assert ".txt" not in text  # never our internal copies' file names (000_84d4d0c11cb8452a.txt)


def _headings(report: str) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", report)


def test_the_report_leads_with_the_answer_and_ends_with_environments(report_html: str) -> None:
    headings = _headings(report_html)
    assert headings[0] == "Results: machines, speedups and verdicts"
    assert headings.index("Figures") < headings.index("Environment (once per machine)")
    assert headings.index("Environment (once per machine)") > headings.index("Feature matrix")
    # The first table of the page is a machine table with its speedup column.
    first_table = report_html.split("<table>", 2)[1]
    assert "<th>speedup</th>" in first_table


def test_environments_are_shown_once_per_machine() -> None:
    same_box = [cpu_and_cuda("one"), cpu_and_cuda("two", cpu=0.11),
                cpu_and_cuda("three", machine="other-box")]
    same_box[1].environment["torch"] = {"version": "2.7"}
    runs = [LabelledRun(r.run_id, r) for r in same_box]
    report = render_report(runs, compare_runs(runs))
    environment = report.split("Environment (once per machine)")[1]
    assert environment.count("<caption>box</caption>") == 1
    assert environment.count("<caption>other-box</caption>") == 1
    assert environment.count("Test CPU (4 cores)") == 2  # once per machine, not once per run
    assert "2.6 (runs one); 2.7 (runs two)" in environment  # a fact that changed is not hidden
    assert all(f"<td>{run_id}</td>" in environment for run_id in ("one", "two", "three"))


def test_throughput_is_plotted_on_one_axis_per_workload() -> None:
    runs = [LabelledRun("a", record("a", [case(median=0.1), case(workload="vae", median=0.002),
                                          case(workload="vae", device="cuda:0", median=0.0004)]))]
    assert list(figures.throughput_panels(runs)) == ["mnist train (samples/s)", "vae train (samples/s)"]
    fig = figures.throughput_plot(runs)
    assert fig is not None and len(fig.axes) == 2
    mnist_axis, vae_axis = fig.axes
    assert mnist_axis.get_title(loc="left") == "mnist train (samples/s)"
    assert mnist_axis.get_xlim()[0] == 0 and vae_axis.get_xlim()[0] == 0
    # MNIST's 640 samples/s fills its own axis instead of vanishing beside the VAE's 160,000.
    assert mnist_axis.get_xlim()[1] < 2000 < vae_axis.get_xlim()[1]
    tick = vae_axis.xaxis.get_major_formatter()
    assert tick(2.5, 0) == "2.5" and tick(200000, 0) == "200,000"  # never 2.5 shown as "2"


def _timeline(series: int, points: int) -> list[TimelinePoint]:
    return [TimelinePoint(f"2025-01-{day + 1:02d}T00:00:00+00:00", 1000.0 - 40 * day + 15 * line,
                          f"r{line}-{day}", f"box{line}", "cpu", 64, "ok")
            for line in range(series) for day in range(points)]


@pytest.mark.parametrize(("series", "points"), [(1, 2), (3, 4), (6, 3)])
def test_history_legend_sits_outside_the_data_and_the_panel_fits(series: int, points: int) -> None:
    """Issue 30: the history legend hid data points, and panels of 2-4 points took 350 px each."""
    fig = figures.timeline_plot(_timeline(series, points), "mnist", "train")
    assert fig is not None
    fig.draw_without_rendering()  # runs the layout, as saving the PNG does
    ax = fig.axes[0]
    legend = fig.legends[0].get_window_extent()
    drawn = [ax.transData.transform(xy) for line in ax.get_lines() for xy in line.get_xydata()]
    assert drawn and not any(legend.contains(x, y) for x, y in drawn)
    assert not legend.overlaps(ax.get_window_extent())
    height_px = fig.get_size_inches()[1] * figures.DPI
    assert height_px < 350 if series <= 3 else height_px < 450


def test_generation_panels_and_history_say_tokens_per_second() -> None:
    """Issue 30: generation panels were labelled "samples per second"."""
    from test_one_figure import _generation_case

    runs = [LabelledRun("g", record("g", [_generation_case()]))]
    assert list(figures.throughput_panels(runs)) == ["nanogpt-char generate (decode tokens/s)"]
    fig = figures.timeline_plot(_timeline(1, 2), "nanogpt-char", "generate")
    assert fig is not None and fig.axes[0].get_ylabel().startswith("decode tokens/s")


def test_history_plots_start_at_zero() -> None:
    points = [TimelinePoint("2025-01-01T00:00:00+00:00", 1000.0, "r1", "box", "cpu", 64, "ok"),
              TimelinePoint("2025-01-02T00:00:00+00:00", 930.0, "r2", "box", "cpu", 64, "ok")]
    fig = figures.timeline_plot(points, "mnist", "train")
    assert fig is not None
    low, high = fig.axes[0].get_ylim()
    assert low == 0 and high >= 1000  # a 7% wobble stays a wobble


def test_profiled_cases_get_a_diagnosis_section() -> None:
    profile = Profile(ProfileFigures(steps=5, source="cpu", step_s=0.1, busy_fraction=0.3,
                                     kernels_per_step=231, median_kernel_s=2e-6,
                                     top_ops=[("aten::convolution_backward", 0.02)],
                                     allocated_bytes_per_step=1e6, parameter_bytes=4_799_528),
                      Ceilings(error="no roofline"))
    runs = [LabelledRun("p", record("p", [case(profile=profile)]))]
    report = render_report(runs, compare_runs(runs))
    assert _headings(report)[:2] == ["Results: machines, speedups and verdicts", "Why: bottleneck diagnosis"]
    text = "".join(_parse(report).text)
    assert "launch-bound" in text and "device busy 30% of the step" in text
    assert "aten::convolution_backward 20.0 ms" in text


def test_sections_present_when_data_is(report_html: str) -> None:
    text = "".join(_parse(report_html).text)
    for heading in ("Environment", "Results", "Figures", "Parity", "Feature matrix"):
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
    # Types are checked when a file is loaded; curves of different lengths still are not drawn.
    runs = [LabelledRun("m", record("m", [case(parity=Parity("pass", steps=[1], candidate=[1.0, 2.0],
                                                               reference=[1.0]))]))]
    assert "parity data is malformed" in render_report(runs, compare_runs(runs))


def test_the_templates_escape_text_and_attributes() -> None:
    """Issue 35: the pages are Jinja2 templates with autoescape on: a string in an attribute
    cannot close it, one in text cannot open a tag."""
    hostile = '"x" onclick=1 <i>'
    probe = record("p1", [], kind="probe")
    probe.probes = [DeviceProbe("cpu", cells={"autocast": ProbeCell("fails", hostile)})]
    page = render_report([LabelledRun("p1", probe)], [])
    assert 'title="&#34;x&#34; onclick=1 &lt;i&gt;"' in page and "<i>" not in page
    cells = [attrs for tag, attrs in _parse(page).tags if tag == "td" and attrs.get("class") == "fails"]
    assert cells == [{"class": "fails", "title": hostile}]


def test_the_templates_ship_with_the_package_and_keep_text_spaced() -> None:
    """Issue 35: the templates are package data (pyproject's package-data; a wheel carries them),
    and their layout whitespace goes (between tags) without gluing words together (inside text)."""
    import importlib.resources

    from accelbench.render.templating import compact

    templates = importlib.resources.files("accelbench.render") / "templates"
    assert all((templates / name).is_file() for name in ("report.html.j2", "site_index.html.j2",
                                                         "notebook.html.j2"))
    assert compact("<p>\n  two\n  words</p>\n  {% if x %}\n  <b>{{ x }}</b>\n{% endif %}\n") == \
        "<p> two words</p>{% if x %}<b>{{ x }}</b>{% endif %}"


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
    """Loads without errors or script execution, sections in the new order, every figure drawn;
    a full-page screenshot goes to $ACCELBENCH_REPORT_SCREENSHOT when set (for a person to look at)."""
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
            headings = page.evaluate("[...document.querySelectorAll('h2')].map(h => h.innerText)")
            assert headings[:3] == ["Results: machines, speedups and verdicts", "Why: bottleneck diagnosis",
                                    "Figures"]
            assert headings.index("Environment (once per machine)") > headings.index("Feature matrix")
            panels = page.locator("img[alt='Throughput, one panel per workload and mode']")
            assert panels.count() == 1 and panels.evaluate("e => e.naturalHeight") > 400
            # History panels of a few points are sized by their content (issue 30: 350 px each)
            history = page.evaluate("""[...document.querySelectorAll("img[alt^='History of']")]
                .map(e => e.naturalHeight)""")
            assert all(0 < height < 350 for height in history)
            screenshot = os.environ.get("ACCELBENCH_REPORT_SCREENSHOT")
            page.screenshot(path=screenshot or str(tmp_path / "report.png"), full_page=True)
        finally:
            browser.close()


def test_a_parity_judged_over_fewer_steps_says_so_and_draws_the_noise_floor() -> None:
    judged = Parity("pass", steps=[1, 2, 3, 4], candidate=[1.0, 0.9, 0.7, 0.2],
                    reference=[1.0, 0.9, 0.8, 0.5], noise_floor=[1.0, 0.9, 0.75, 0.3], judged_steps=2)
    runs = [LabelledRun("m", record("m", [case(parity=judged)]))]
    report = render_report(runs, compare_runs(runs))
    text = "".join(_parse(report).text)
    assert "judged steps 1-2 of 4" in text
    alone = Parity("pass", steps=[1, 2, 3, 4], candidate=[1.0, 0.9, 0.7, 0.2],
                   reference=[1.0, 0.9, 0.8, 0.5])
    plain = render_report([LabelledRun("m", record("m", [case(parity=alone)]))], compare_runs(runs))
    assert "judged steps" not in plain
    # The noise floor and the shaded unjudged steps are drawn: the picture differs.
    images = [re.findall(r'<img [^>]*src="([^"]+)"', html) for html in (report, plain)]
    assert images[0] and images[1] and images[0][-1] != images[1][-1]


def test_each_cases_peak_memory_carries_its_source_tag() -> None:
    """Issue 19: the CPU's whole-process peak RSS and CUDA's allocator peak of live tensors are
    different quantities; the report tags each row, and keeps the full words beside the tag."""
    run = record("mem1", [
        case(peak_memory_bytes=900 * 2**20, memory_source="process peak RSS"),
        case(device="cuda:0", peak_memory_bytes=3 * 2**30,
             memory_source="CUDA caching allocator peak (torch.cuda.max_memory_allocated: live tensors)"),
        case(device="mps:0", peak_memory_bytes=2**30, memory_is_lower_bound=True,
             memory_source="MPS live tensors sampled at step boundaries (a lower bound)"),
        case(device="cuda:1", step_times=[]),  # no figure: no row
    ])
    runs = [LabelledRun("mem1", run)]
    html = render_report(runs, compare_runs(runs), generated_at="now")
    assert "Peak memory and where it comes from" in html
    section = html.split("Peak memory and where it comes from", 1)[1].split("</table>", 1)[0]
    rows = [re.sub(r"(<[^>]+>)+", "|", row) for row in section.split("<tr>")[2:]]
    assert len(rows) == 3, rows
    cpu, cuda, mps = rows
    assert "|cpu|" in cpu and "|900.0 MiB RSS|RSS|process peak RSS|" in cpu
    assert "|cuda:0|" in cuda and "|3.0 GiB allocator|allocator|CUDA caching allocator peak" in cuda
    assert "|mps:0|" in mps and "|≥ 1.0 GiB sampled|sampled|MPS live tensors sampled" in mps


def test_bars_are_named_by_what_differs_between_them() -> None:
    """Issue 36: every generation bar read "<run id> cpu b1", so int8 could not be told from int4
    nor one MLPerf Client category from another."""
    from dataclasses import replace

    from test_one_figure import _generation_case

    plain = _generation_case()
    quantized = [replace(plain, precision=precision) for precision in ("int8-wo", "int4-wo")]
    runs = [LabelledRun("q", record("q", quantized))]
    (bars,) = figures.throughput_panels(runs).values()
    assert [name for name, _, _ in bars] == ["int8-wo", "int4-wo"]

    def category(test: str, prompt: int, new: int):
        generation = replace(plain.generation, protocol=ProtocolSection("mlperf-client", test,
                                                                         figure="category"))
        return replace(plain, protocol="mlperf-client", prompt_len=prompt, new_tokens=new,
                       generation=generation)

    run = LabelledRun("m", record("m", []))
    names = figures.bar_names([(run, category("content generation", 128, 256)),
                               (run, category("code analysis", 2048, 128))])
    assert names == ["mlperf-client content generation prompt 128 +256",
                     "mlperf-client code analysis prompt 2048 +128"]
    compiled = replace(plain, compile_backend="inductor")
    assert figures.bar_names([(run, plain), (run, compiled)]) == ["eager", "compile:inductor"]
    # Nothing differs: the run and the device still name the bar.
    assert figures.bar_names([(run, plain)]) == ["m cpu"]
