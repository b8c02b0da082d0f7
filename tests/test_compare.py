"""Comparison: significance rule, comparability, published-style rows, and the compare command."""

from __future__ import annotations

from pathlib import Path

from conftest_report import HOSTILE_MACHINE, case, cpu_and_cuda, record, steps

from accelbench.cli import main
from accelbench.compare import (
    FASTER,
    NOT_COMPARABLE,
    NOT_RUN,
    SAME,
    SLOWER,
    TOO_FEW,
    LabelledRun,
    compare_cases,
    compare_runs,
    describe,
)
from accelbench.store.history import HistoryDB
from accelbench.store.jsonfile import save_record


def test_clearly_different_samples_are_faster_or_slower() -> None:
    slow, fast = case(median=0.10, seed=1), case(median=0.05, seed=2)
    verdict = compare_cases(slow, fast)
    assert verdict.verdict == FASTER and verdict.p_value < 0.05
    assert abs(verdict.ratio - 2.0) < 0.1
    assert "faster" in describe(verdict)
    assert compare_cases(fast, slow).verdict == SLOWER


def test_overlapping_noisy_samples_are_same_within_noise() -> None:
    # Medians 3% apart but a 30% spread: not a difference the data can support.
    a = case(step_times=steps(0.100, n=12, spread=0.3, seed=5))
    b = case(step_times=steps(0.103, n=12, spread=0.3, seed=6))
    verdict = compare_cases(a, b)
    assert verdict.verdict == SAME and verdict.p_value >= 0.05
    assert describe(verdict).startswith("same within noise")


def test_different_work_is_not_comparable() -> None:
    base = case(median=0.1)
    for other, reason in ((case(median=0.05, batch_size=128), "batch size 64 vs 128"),
                          (case(median=0.05, precision="bf16"), "precision"),
                          (case(median=0.05, workload_version=2), "workload version"),
                          (case(median=0.05, data="real"), "data"),
                          (case(median=0.05, size="tiny"), "size"),
                          (case(median=0.05, compile_backend="inductor"), "compile backend")):
        verdict = compare_cases(base, other)
        assert verdict.verdict == NOT_COMPARABLE and reason in verdict.reason
        assert verdict.ratio is None


def test_failed_and_tiny_cases() -> None:
    failed = case(status="oom", error="CUDA out of memory", step_times=[])
    assert compare_cases(case(), failed).verdict == NOT_RUN
    few = compare_cases(case(step_times=[0.1, 0.1, 0.1]), case(step_times=[0.05, 0.05, 0.05]))
    assert few.verdict == TOO_FEW and "untested" in describe(few)


def test_compare_runs_rows_pairs_and_references() -> None:
    a = LabelledRun("a", cpu_and_cuda("a", machine="alpha", cpu=0.1, cuda=0.02))
    b = LabelledRun("b", cpu_and_cuda("b", machine="beta", cpu=0.1, cuda=0.04))
    groups = compare_runs([a, b], with_reference=True)
    train = next(g for g in groups if (g.workload, g.mode) == ("mnist", "train"))
    assert [row.run.label for row in train.rows] == ["a", "b"]
    assert abs(train.rows[0].speedup - 5.0) < 0.5  # CPU epoch / accelerator epoch
    kinds = {(p.a.device, p.b.device): p.verdict.verdict for p in train.pairs}
    assert kinds[("cuda:0", "cuda:0")] == SLOWER  # b's GPU is half as fast
    assert ("cpu", "cuda:0") not in kinds  # pairs only within one device kind
    assert {r.machine for r in train.references} >= {"Apple M1 (MPS)"}
    evaluation = next(g for g in groups if g.mode == "eval")
    assert evaluation.rows[0].accel is None and evaluation.references == []


def test_compare_command_in_process(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping inside cells
    save_record(cpu_and_cuda("filerun", machine=HOSTILE_MACHINE), tmp_path / "f.json")
    with HistoryDB() as db:
        db.add_record(record("stored1", [case(median=0.05, batch_size=128)], machine="[bold]b[/bold]"))
    assert main(["compare", str(tmp_path / "f.json"), "stored", "--reference"]) == 0
    out = capsys.readouterr().out
    assert HOSTILE_MACHINE in out and "[bold]b[/bold]" in out
    assert "not comparable" in out and "batch size 64 vs 128" in out
    assert "published, not measured here" in out and "33.4 s" in out and "19.6 s" in out
    assert main(["compare", "--reference"]) == 0
    listing = capsys.readouterr().out
    for figure in ("59.3", "138,357,544", "Unsupported device type: mps", "derived", "up to 20x"):
        assert figure in listing


def test_compare_errors(tmp_path: Path, capsys) -> None:
    # In-process: the subprocess form of the same error path is covered by test_export.py.
    with HistoryDB() as db:
        db.add_record(cpu_and_cuda("known1"))
    assert main(["compare", "known1", "unknown9"]) == 2
    (tmp_path / "corrupt.json").write_text("[1, 2")
    assert main(["compare", "known1", str(tmp_path / "corrupt.json")]) == 2
    assert main(["compare"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 3 and all(line.startswith("accelbench: error: ") for line in errors)
    assert "no stored run has the id 'unknown9'" in errors[0]
    assert "not valid JSON" in errors[1] and "--reference" in errors[2]


def test_checks_and_probes_are_not_compared_as_timings() -> None:
    check = record("check1", [case(median=0.01)], kind="check")
    probe = record("probe1", [case(workload="features", mode="probe")], kind="probe")
    groups = compare_runs([LabelledRun("run", cpu_and_cuda("run1")), LabelledRun("check", check),
                           LabelledRun("probe", probe)])
    assert {(g.workload, g.mode) for g in groups} == {("mnist", "train"), ("mnist", "eval")}
    assert all(row.run.label == "run" for g in groups for row in g.rows)
    assert all(not g.pairs for g in groups)
