"""Issue 34, "peaks that say what they are" (the surfaces): a case whose ``% peak`` rests on a
capped peak, a busy one, or a good one whose latest re-check ran on a busy machine carries one
mark (render/peak_marks.py) on every surface that shows ``% peak`` or ``fraction_of_peak``: the
run table (``--wide``), ``--json``, the CSV, Markdown and HUD exports, the HTML report, the
``--profile`` diagnosis, and the shared line (``limits``, which plausibility reads); a result
whose peak nothing marks carries none. The re-checked mark comes from the real re-check
(measure/ceilings/peak.py) and goes as soon as a check finds the machine quiet.

The runs are real (mnist, tiny, in this process so the machine's conditions are the test's); the
peak each is held against is planted in the peak cache, as a run before it would have left it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from accelbench.devices import Device, DeviceSet, contention
from accelbench.devices.contention import Conditions
from accelbench.devices.numerics import get_precision
from accelbench.engine.case import Case, skeleton_result
from accelbench.engine.measure_case import achieved_flops
from accelbench.measure.ceilings import peak
from accelbench.measure.ceilings.peak_keys import cache_key, write_cache
from accelbench.options import RunOptions
from accelbench.render.diagnosis import diagnose
from accelbench.render.json_views import record_view
from accelbench.render.peak_marks import flops_text, peak_mark
from accelbench.results import CaseResult, Ceilings, Profile, ProfileFigures
from accelbench.results.figures import Flops
from accelbench.sharing.build import case_line
from accelbench.sharing.plausible import implausible
from accelbench.store.history import HistoryDB

BUSY = Conditions(0.5, others_cpu_share=0.6, steal_share=0.0)
QUIET = Conditions(0.5, others_cpu_share=0.0, steal_share=0.0)
BUSY_WORDS = "other processes used 60% of the CPUs"

#: What each planted peak entry adds to a good one, its mark in full, and the run table's words.
MARKS = {
    "capped": ({"limited_by": ["software power cap"], "clock_mhz": 1380.0},
               "capped peak (software power cap at 1,380 MHz)", "of a capped peak"),
    "busy": ({"busy": BUSY_WORDS, "conditions": BUSY.to_dict()}, f"busy peak ({BUSY_WORDS})",
             "of a busy peak"),
    "re-checked": ({"last_busy": BUSY_WORDS, "last_conditions": BUSY.to_dict()},
                   f"peak re-checked on a busy machine ({BUSY_WORDS})",
                   "of a peak re-checked on a busy machine"),
}
#: Words no surface may show for a peak nothing marks (the report's caption explains the marks).
MARK_WORDS = ("capped peak", "busy peak", "peak re-checked")


def _watch(conditions: Conditions) -> type:
    class Watch:  # a measurement's own window, read as the test says
        def __init__(self, *args: object, **kwargs: object) -> None: ...

        def start(self) -> None: ...

        def stop(self) -> Conditions:
            return conditions

    return Watch


def _machine(monkeypatch: pytest.MonkeyPatch, conditions: Conditions) -> None:
    monkeypatch.setattr(contention, "now", lambda *args, **kwargs: conditions)
    monkeypatch.setattr(contention, "ContentionWatch", _watch(conditions))


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "peak.json"
    monkeypatch.setenv("ACCELBENCH_PEAK_CACHE", str(path))
    return path


def _cpu() -> Device:
    return DeviceSet.current().select("cpu")[0]


def _plant(path: Path, **marks: object) -> None:
    """The CPU's fp32 peak as a run seconds ago left it: 150.1 GFLOP/s, checked just now."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    entry = {"flops": 150.1e9, "matrix_side": 512, "products_per_sync": 4, "repeats": 5,
             "measured_at": now, "checked_at": now, "busy": "", "conditions": QUIET.to_dict(),
             "limited_by": [], "clock_mhz": None, "last_busy": "", **marks}
    write_cache(path, {cache_key(_cpu(), "fp32"): entry})


def _run(inline_cli, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A real tiny mnist training case on the CPU, its run table --wide (wide enough that no cell
    wraps), and its run id."""
    monkeypatch.setenv("COLUMNS", "400")
    done = inline_cli("run", "mnist", "--device", "cpu", "--mode", "train", "--size", "tiny", "--steps", "3",
                      "--warmup", "1", "--isolation", "none", "--wide")
    assert done.returncode == 0, done.stderr
    run_id = re.search(r"accelbench run ([0-9a-f]+)", done.stdout)
    assert run_id, done.stdout
    return done.stdout, run_id.group(1)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _surfaces(inline_cli, run_id: str, tmp_path: Path) -> dict[str, str]:
    """Every surface of the stored run that shows % peak, as a user gets it."""
    out = {fmt: inline_cli("export", run_id, "--format", fmt) for fmt in ("json", "csv", "markdown", "hud")}
    assert all(done.returncode == 0 for done in out.values()), {k: v.stderr for k, v in out.items()}
    report = tmp_path / "report.html"
    assert inline_cli("report", run_id, "-o", str(report)).returncode == 0
    text = _Text()
    text.feed(report.read_text(encoding="utf-8"))
    return {**{fmt: done.stdout for fmt, done in out.items()}, "report": " ".join(text.parts)}


@pytest.mark.parametrize("kind", sorted(MARKS))
def test_a_marked_peak_is_said_on_every_surface(kind: str, own_cache: Path, inline_cli, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    entry, words, table_words = MARKS[kind]
    _plant(own_cache, **entry)
    _machine(monkeypatch, BUSY)  # still as busy: nothing re-measures the planted peak first
    table, run_id = _run(inline_cli, monkeypatch)
    assert table_words in table
    shown = _surfaces(inline_cli, run_id, tmp_path)
    # the stored result (export --format json is the result file) and --json's view of it
    [stored] = json.loads(shown["json"])["cases"]
    assert stored["flops"]["peak_flops"] == 150.1e9 and stored["flops"]["fraction_of_peak"] is not None
    with HistoryDB() as db:
        record = db.get(run_id)
    [viewed] = record_view(record)["cases"]
    assert viewed["peak_mark"] == words
    [row] = csv.DictReader(io.StringIO(shown["csv"]))
    assert row["peak_mark"] == words and row["fraction_of_peak"] != ""
    assert f"| {words} |" in shown["markdown"] and table_words in shown["markdown"]
    [share] = [r for r in json.loads(shown["hud"]) if r["metric"]["name"] == "fraction_of_peak"]
    assert share["metric"]["extra_info"]["peak_mark"] == words
    assert words in shown["report"] and table_words in shown["report"]
    # the shared line carries what the peak was (compare --against, the site and hub read lines)
    limits = case_line(record, record.cases[0], "m")["limits"]
    said = {"capped": ("peak_limited_by", "software power cap"), "busy": ("peak_busy", BUSY_WORDS),
            "re-checked": ("peak_recheck_busy", BUSY_WORDS)}[kind]
    assert limits[said[0]] == said[1]


def test_a_peak_nothing_marks_shows_no_mark(own_cache: Path, inline_cli, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _plant(own_cache)
    _machine(monkeypatch, BUSY)  # a busy machine now marks nothing it did not measure
    table, run_id = _run(inline_cli, monkeypatch)
    assert "% peak" in table and not any(word in table for word in MARK_WORDS)
    shown = _surfaces(inline_cli, run_id, tmp_path)
    with HistoryDB() as db:
        record = db.get(run_id)
    assert record_view(record)["cases"][0]["peak_mark"] is None
    [row] = csv.DictReader(io.StringIO(shown["csv"]))
    assert row["peak_mark"] == "" and row["fraction_of_peak"] != ""
    [share] = [r for r in json.loads(shown["hud"]) if r["metric"]["name"] == "fraction_of_peak"]
    assert "peak_mark" not in share["metric"]["extra_info"]
    assert "FLOP/s against the measured peak" in shown["markdown"]  # the % peak is shown, unmarked
    assert "FLOP/s against the measured peak" in shown["report"]
    for surface in ("markdown", "report", "csv"):
        assert not any(word in shown[surface] for word in MARK_WORDS), surface
    limits = case_line(record, record.cases[0], "m")["limits"]
    assert not {"peak_limited_by", "peak_busy", "peak_recheck_busy"} & set(limits)


def _case(device: Device) -> CaseResult:
    """An mnist training case with its FLOP/s figures, as the engine stores them."""
    result = skeleton_result(Case(workload="mnist", mode="train", device=device, batch_size=8,
                                  precision="fp32"), RunOptions(size="tiny"))
    result.step_times = [0.01] * 5
    result.flops = Flops.from_dict(achieved_flops(result, device, get_precision("fp32")), "flops")
    return result


def test_a_good_peak_re_checked_on_a_busy_machine_is_marked_until_a_quiet_check(
        own_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-check of a good 150.1 GFLOP/s peak reads 46.7 beside other work: the good figure
    stands, and the case says its latest check ran on a busy machine; once a short probe finds
    the machine quiet, the peak is checked again before it is used and the mark goes."""
    cpu = _cpu()
    peak.record_measurement(cpu, "fp32", peak.MatmulTiming(150.1e9, 512, 4, 5), conditions=QUIET)
    readings = [46.7e9, 149.0e9]
    monkeypatch.setattr(peak, "time_matmul",
                        lambda *args, **kwargs: peak.MatmulTiming(readings.pop(0), 512, 4, 2))
    monkeypatch.setattr(peak, "RECHECK_AFTER_S", -1.0)  # this lookup re-checks
    _machine(monkeypatch, BUSY)
    rechecked = _case(cpu)
    assert rechecked.flops.peak_flops == 150.1e9 and rechecked.flops.peak_busy == ""
    assert BUSY_WORDS in rechecked.flops.peak_recheck_busy
    assert "far below the last good 150.1" in rechecked.flops.peak_recheck_busy
    assert rechecked.to_dict()["flops"]["peak_recheck_busy"] == rechecked.flops.peak_recheck_busy
    assert "of a peak re-checked on a busy machine" in flops_text(rechecked)
    # checked a moment ago and the machine still as busy: used as it stands, still marked
    monkeypatch.setattr(peak, "RECHECK_AFTER_S", 3600.0)
    again = _case(cpu)
    assert len(readings) == 1 and again.flops.peak_recheck_busy == rechecked.flops.peak_recheck_busy
    # quiet again: checked before it is used (not a minute later), and the mark is gone
    _machine(monkeypatch, QUIET)
    quiet = _case(cpu)
    assert readings == [] and quiet.flops.peak_recheck_busy == "" and peak_mark(quiet.flops) is None
    assert quiet.flops.peak_flops == 150.1e9 and "re-checked" not in flops_text(quiet)


def test_a_result_written_before_the_marks_loads_unmarked() -> None:
    old = {"peak_flops": 1e11, "achieved_flops": 1e10, "fraction_of_peak": 0.1, "peak_busy": ""}
    flops = Flops.from_dict(old, "flops")
    assert flops.peak_recheck_busy == "" and peak_mark(flops) is None
    assert flops_text(CaseResult(workload="mnist", mode="train", device="cpu", batch_size=8,
                                 flops=flops)).endswith("(10%)")


def test_the_diagnosis_says_what_the_peak_was() -> None:
    figures = ProfileFigures(steps=4, source="device", step_s=0.01, busy_fraction=0.95, kernels_per_step=20,
                             median_kernel_s=4e-4, top_ops=[], parameter_bytes=1_000_000)
    capped = Flops(achieved_flops=8e13, peak_flops=1e14, fraction_of_peak=0.8,
                   peak_limited_by=["software power cap"], peak_clock_mhz=1380.0)
    case = CaseResult(workload="mnist", mode="train", device="cuda:0", batch_size=8, step_times=[0.01] * 5,
                      flops=capped, profile=Profile(figures, Ceilings()))
    found = diagnose(case)
    assert found is not None and found.word == "compute-bound"
    assert "80% of the FLOP/s peak" in found.line
    assert "a capped peak (software power cap at 1,380 MHz)" in found.line
    case.flops = Flops(achieved_flops=8e13, peak_flops=1e14, fraction_of_peak=0.8)
    assert "capped" not in diagnose(case).line  # type: ignore[union-attr]


def test_a_line_is_not_held_against_a_busy_peak() -> None:
    """A busy peak reads low: a shared line beating it is held to the datasheet instead, and the
    same line against a good peak of that figure is flagged (the check can fail)."""
    case = CaseResult(workload="mnist", mode="train", device="cpu", batch_size=64,
                      step_times=[0.1] * 30, dataset_size=60000,
                      flops=Flops(achieved_flops=2e10, peak_flops=1e10, fraction_of_peak=2.0,
                                  peak_busy=BUSY_WORDS))
    from conftest_report import record

    line = case_line(record("busy1", [case]), case, "m")
    assert line["limits"]["peak_busy"] == BUSY_WORDS
    assert "measured peak" not in implausible(line)
    del line["limits"]["peak_busy"]
    assert "of the device's measured peak FLOP/s" in implausible(line)
