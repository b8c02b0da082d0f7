"""Reading a comparison at 100 columns: one compact table per workload and mode, a short verdict
word and ratio per row, each explanation once, no empty columns, nothing broken mid-word."""

from __future__ import annotations

import re
from pathlib import Path

from conftest_report import case, cpu_and_cuda, record

from accelbench.cli import main
from accelbench.compare import LabelledRun, compare_runs
from accelbench.render.html import render_report
from accelbench.store.jsonfile import save_record

RUN_A, RUN_B = "e253809f45d8", "6267dbe45994"


def _two_cpu_runs(tmp_path: Path) -> list[str]:
    """Like two `accelbench run mnist vae --size tiny` on a CPU-only machine: 4 cases each."""
    paths = []
    for run_id, slower in ((RUN_A, 1.0), (RUN_B, 1.1)):
        cases = [case(workload=w, mode=m, median=0.01 * slower * (2 if m == "train" else 1), batch_size=b,
                      size="tiny", seed=i, dataset_size=64, device_name="AMD EPYC")
                 for i, (w, m, b) in enumerate((("mnist", "train", 8), ("mnist", "eval", 16),
                                                ("vae", "train", 8), ("vae", "eval", 16)))]
        paths.append(str(save_record(record(run_id, cases, machine="vm"), tmp_path / f"{run_id}.json")))
    return paths


def _compare(capsys, *args: str) -> str:
    assert main(["compare", *args]) == 0
    return capsys.readouterr().out


def _unbroken(narrow: str, wide: str) -> None:
    """Every word printed at 100 columns is a whole word of the unwrapped (wide) output."""
    whole = set(wide.split())
    broken = [word for word in narrow.split() if word not in whole and set(word) != {"─"}]
    assert broken == [], broken


def test_two_cpu_runs_read_as_four_compact_tables(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    runs = _two_cpu_runs(tmp_path)
    out = _compare(capsys, *runs)
    monkeypatch.setenv("COLUMNS", "1000")
    _unbroken(out, _compare(capsys, *runs))
    lines = out.splitlines()
    assert len(lines) <= 40, out  # was about 125 lines
    assert all(len(line) <= 100 for line in lines)
    # One table per workload and mode, each with one header; nothing empty, nothing repeated.
    titles = [line.split()[0] for line in lines if line.endswith(("train", "eval"))]
    assert titles == ["mnist", "mnist", "vae", "vae"]
    headers = [line for line in lines if line.lstrip().startswith("run ")]
    assert len(headers) == 4 and all("accel" not in h and "speedup" not in h for h in headers)
    assert out.count("one process a side says nothing about the spread") == 1
    assert out.count("95% interval of the throughput ratio") == 1
    # Run ids whole, the verdict a word and a ratio with a mark.
    assert sum(RUN_A in line for line in lines) == 4 and sum(RUN_B in line for line in lines) == 4
    assert all(h.rstrip().endswith("vs A") for h in headers)
    verdicts = re.findall(r"\d\.\d\dx can't tell(?: noisy)?¹", out)
    assert len(verdicts) == 4


def test_accelerator_columns_and_their_words_are_whole(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    a = save_record(cpu_and_cuda("a1b2c3d4e5f6", machine="alpha"), tmp_path / "a.json")
    b = save_record(cpu_and_cuda("0f9e8d7c6b5a", machine="beta", cuda=0.04), tmp_path / "b.json")
    out = _compare(capsys, str(a), str(b), "--reference")
    monkeypatch.setenv("COLUMNS", "1000")
    wide = _compare(capsys, str(a), str(b), "--reference")
    _unbroken(out, wide)
    lines = out.splitlines()
    assert all(len(line) <= 100 for line in lines)
    # The header lines of every part of the first table (with its rate columns, it may be split
    # into parts one under the other at 100 columns).
    first = lines[:lines.index("mnist · eval")]
    rules = [i for i, line in enumerate(first) if line.startswith("───")]
    header = " ".join(f"{first[rule - 2]} {first[rule - 1]}" for rule in rules)  # two-line headers
    for word in ("accelerator", "accel.", "epoch", "speedup", "vs", "A"):
        assert re.search(rf"(^|\s){re.escape(word)}(\s|$)", header), (word, header)
    text = " ".join(out.split())
    assert "cpu: 1.00x can't tell¹; cuda: 1.25x can't tell¹" in wide
    assert "published, not measured here" in text and "19.6 s" in text
    words = set(text.split())
    for whole in ("a.json", "b.json", "accelerator", "published"):
        assert whole in words


def test_the_report_says_the_rule_once(tmp_path: Path) -> None:
    runs = [LabelledRun(r.run_id, r) for r in (cpu_and_cuda("r1"), cpu_and_cuda("r2", cuda=0.04))]
    runs[0].record.cases.append(case(workload="vae", median=0.01, seed=7))
    runs[1].record.cases.append(case(workload="vae", median=0.012, seed=8))
    html = render_report(runs, compare_runs(runs), generated_at="now")
    assert html.count("95% interval of the throughput ratio") == 1
    assert html.count("one process a side says nothing") == 1
    assert html.count("<h3>") == 3  # mnist train, mnist eval, vae train: one table each
