"""Comparison: significance rule, comparability, published-style rows, and the compare command."""

from __future__ import annotations

from pathlib import Path

from conftest_report import HOSTILE_MACHINE, case, cpu_and_cuda, record

from accelbench.cli import main
from accelbench.compare import (
    CANT_TELL,
    FASTER,
    NOT_COMPARABLE,
    NOT_RUN,
    SAME,
    SLOWER,
    LabelledRun,
    compare_cases,
    compare_runs,
    describe,
)
from accelbench.engine.repeat import merge_repeats
from accelbench.results import CaseResult, DeviceProbe, ProbeCell
from accelbench.results.generation import Generation
from accelbench.store.history import HistoryDB
from accelbench.store.jsonfile import save_record


def processes(medians: list[float], **fields) -> CaseResult:
    """A case measured in one worker process per median (as --repeat N records it)."""
    return merge_repeats([case(median=m, seed=i, **fields) for i, m in enumerate(medians)])


def test_clearly_different_processes_are_faster_or_slower() -> None:
    slow = processes([0.100, 0.102, 0.099, 0.101])
    fast = processes([0.050, 0.051, 0.049, 0.050])
    verdict = compare_cases(slow, fast)
    assert verdict.verdict == FASTER and verdict.processes == (4, 4)
    # 4 vs 4: the 95% rank interval is the range of the 16 pairwise ratios.
    assert abs(verdict.ratio - 2.0) < 0.1 and verdict.low > 1.85 and verdict.high < 2.15
    assert "faster" in describe(verdict) and "4 vs 4 processes" in describe(verdict)
    assert compare_cases(fast, slow).verdict == SLOWER


def test_one_process_a_side_is_never_called() -> None:
    # Two single processes 2x apart with thousands of tight samples each: the old per-step test
    # called this with p ~ 1e-90; across processes there is nothing to judge the spread by.
    slow, fast = case(median=0.10, seed=1), case(median=0.05, seed=2)
    verdict = compare_cases(slow, fast)
    assert verdict.verdict == CANT_TELL and verdict.low is None
    assert "--repeat" in describe(verdict) and "can't tell" in describe(verdict)


def test_tight_processes_are_same_within_noise_and_wide_ones_cant_tell() -> None:
    a = processes([0.100, 0.101, 0.099, 0.100, 0.100])
    b = processes([0.101, 0.100, 0.100, 0.099, 0.101])
    assert compare_cases(a, b).verdict == SAME
    assert describe(compare_cases(a, b)).startswith("same within noise")
    # 3% apart with a 15% spread between processes: neither a difference nor the same.
    wide_a = processes([0.085, 0.115, 0.100])
    wide_b = processes([0.088, 0.118, 0.103])
    assert compare_cases(wide_a, wide_b).verdict == CANT_TELL


def test_a_significant_difference_below_the_minimum_effect_is_not_called() -> None:
    # 2% faster with almost no spread: significant, but inside the +-5% noise band.
    a = processes([0.1000, 0.1001, 0.0999, 0.1000])
    b = processes([0.0980, 0.0981, 0.0979, 0.0980])
    verdict = compare_cases(a, b)
    assert verdict.low > 1 and verdict.verdict == SAME


def test_different_work_is_not_comparable() -> None:
    base = case(median=0.1)
    for other, reason in ((case(median=0.05, batch_size=128), "batch size 64 vs 128"),
                          (case(median=0.05, precision="bf16"), "precision"),
                          (case(median=0.05, workload_version=2), "workload version"),
                          (case(median=0.05, data="real"), "data"),
                          (case(median=0.05, size="tiny"), "size"),
                          (case(median=0.05, channels_last=True), "channels last"),
                          (case(median=0.05, compile_backend="inductor"), "compile backend")):
        verdict = compare_cases(base, other)
        assert verdict.verdict == NOT_COMPARABLE and reason in verdict.reason
        assert verdict.ratio is None


def test_failed_cases_and_failed_processes() -> None:
    failed = case(status="oom", error="CUDA out of memory", step_times=[])
    assert compare_cases(case(), failed).verdict == NOT_RUN
    one_crashed = merge_repeats([case(seed=1), case(status="crashed", error="SIGSEGV", step_times=[])])
    assert one_crashed.status == "crashed" and "process 2 of 2: SIGSEGV" in one_crashed.error
    assert len(one_crashed.repeats) == 2 and one_crashed.repeats[0].step_times


def test_compare_runs_rows_pairs_and_references() -> None:
    a = LabelledRun("a", cpu_and_cuda("a", machine="alpha", cpu=0.1, cuda=0.02))
    b = LabelledRun("b", cpu_and_cuda("b", machine="beta", cpu=0.1, cuda=0.04))
    groups = compare_runs([a, b], with_reference=True)
    train = next(g for g in groups if (g.workload, g.mode) == ("mnist", "train"))
    assert [row.run.label for row in train.rows] == ["a", "b"]
    assert abs(train.rows[0].speedup - 5.0) < 0.5  # CPU epoch / accelerator epoch
    kinds = {(p.a.device, p.b.device): p.verdict.verdict for p in train.pairs}
    assert kinds[("cuda:0", "cuda:0")] == CANT_TELL  # b's GPU is half as fast, but one process each
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
    # Sources by title and public address, never the internal copy's file name.
    assert ".txt" not in out + listing and "https://" in listing


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
    probe = record("probe1", [], kind="probe")
    probe.probes = [DeviceProbe("cpu", cells={"fft": ProbeCell("works")})]
    groups = compare_runs([LabelledRun("run", cpu_and_cuda("run1")), LabelledRun("check", check),
                           LabelledRun("probe", probe)])
    assert {(g.workload, g.mode) for g in groups} == {("mnist", "train"), ("mnist", "eval")}
    assert all(row.run.label == "run" for g in groups for row in g.rows)
    assert all(not g.pairs for g in groups)


def _run(run_id: str, cases: list[CaseResult], power: dict | None = None) -> LabelledRun:
    run = record(run_id, cases)
    if power is not None:
        run.environment["power"] = power
    return LabelledRun(run_id, run)


def test_repeated_runs_call_a_real_difference_and_show_power_differences() -> None:
    a = _run("a", [processes([0.02, 0.021, 0.0205, 0.0202], device="cuda:0")],
             power={"power_source": {"value": "AC"}, "cpu_governor": {"na": "hidden"}})
    b = _run("b", [processes([0.04, 0.041, 0.039, 0.0402], device="cuda:0")],
             power={"power_source": {"value": "battery (40%)"}, "cpu_governor": {"value": "powersave"}})
    pair = compare_runs([a, b])[0].pairs[0]
    assert pair.verdict.verdict == SLOWER and pair.verdict.processes == (4, 4)
    # n/a on one side is a missing reading, not a difference.
    assert pair.power_note == "power source AC vs battery (40%)"


def test_compile_lists_pair_eager_with_eager_everywhere(monkeypatch) -> None:
    """--compile inductor,eager: the accelerator's eager case is held against the CPU's eager case
    in the run table, compare's rows and pairs, and the report (issue 11)."""
    from accelbench.render.html import render_report
    from accelbench.render.table import vs_cpu_cell

    def suite(run_id: str) -> LabelledRun:
        return _run(run_id, [
            processes([0.100, 0.101, 0.099], compile_backend="inductor"),
            processes([0.200, 0.202, 0.198], compile_backend="eager"),
            processes([0.020, 0.0202, 0.0198], device="cuda:0", compile_backend="inductor"),
            processes([0.020, 0.0202, 0.0198], device="cuda:0", compile_backend="eager")])

    run = suite("r1")
    cases = run.record.cases
    # Like for like: eager 0.2 / 0.02 = 10x; the old first-CPU-case rule gave 5x.
    assert vs_cpu_cell(cases[3], cases).startswith("10.0")
    assert vs_cpu_cell(cases[2], cases).startswith("5.0")
    group = compare_runs([run, suite("r2")])[0]
    speedups = {row.accel.compile_backend: row.speedup for row in group.rows if row.run.label == "r1"}
    assert abs(speedups["eager"] - 10) < 0.2 and abs(speedups["inductor"] - 5) < 0.1
    assert all(p.a.compile_backend == p.b.compile_backend for p in group.pairs)
    assert len(group.pairs) == 4 and all(p.verdict.verdict != NOT_COMPARABLE for p in group.pairs)
    html = render_report([run], compare_runs([run]), {}, "t", "now")
    assert "10.00x" in html and "compile:eager" in html


def test_every_precision_reaches_the_machine_table() -> None:
    run = _run("p", [case(median=0.1), case(median=0.3, precision="bf16"),
                     case(device="cuda:0", median=0.01), case(device="cuda:0", median=0.01,
                                                              precision="bf16")])
    rows = compare_runs([run])[0].rows
    assert [(r.cpu.precision, r.accel.precision) for r in rows] == [("fp32", "fp32"), ("bf16", "bf16")]
    assert abs(rows[1].speedup - 30) < 3


def test_cpu_only_configuration_keeps_its_row() -> None:
    run = _run("c", [case(median=0.1, precision="bf16"), case(device="cuda:0", median=0.01)])
    rows = compare_runs([run])[0].rows
    assert {(r.cpu.precision if r.cpu else None, r.accel.precision if r.accel else None)
            for r in rows} == {("bf16", None), (None, "fp32")}


def test_a_differing_cudnn_benchmark_is_compared_and_shown(capsys, tmp_path: Path, monkeypatch) -> None:
    """cudnn.benchmark changes the speed, not the work: the cases are compared (not "not
    comparable") and the pair names the difference, like threads; a side that did not record it
    (an older result) is no difference."""
    def gpu(benchmark: bool | None, medians: list[float], threads: int = 8) -> CaseResult:
        flags = {} if benchmark is None else {"cudnn_benchmark": benchmark, "cudnn_allow_tf32": False}
        return processes(medians, device="cuda:0", backend_flags=flags, threads=threads)

    a = _run("a", [gpu(True, [0.020, 0.0201, 0.0199, 0.0200])])
    b = _run("b", [gpu(False, [0.030, 0.0301, 0.0299, 0.0300], threads=4)])
    pair = compare_runs([a, b])[0].pairs[0]
    assert pair.verdict.verdict == SLOWER
    assert pair.settings_note == "threads 8 vs 4; cudnn.benchmark on vs off"
    older = _run("c", [gpu(None, [0.030, 0.0301, 0.0299, 0.0300])])
    assert compare_runs([a, older])[0].pairs[0].settings_note == ""
    monkeypatch.setenv("COLUMNS", "400")
    save_record(a.record, tmp_path / "a.json")
    save_record(b.record, tmp_path / "b.json")
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "settings against A differ: threads 8 vs 4; cudnn.benchmark on vs off" in out
    assert "not comparable" not in out


def test_the_rate_column_shows_what_the_ratio_is_computed_from(capsys, monkeypatch) -> None:
    """Issue 36: a projected epoch (mean step) beside a ratio of median rates read as a
    contradiction; each row now shows the rate its ratio is of, named by kind of work, and a
    generation row its tokens/s, never "no epoch size" under an epoch column."""
    monkeypatch.setenv("COLUMNS", "400")
    slow_tail = [0.1] * 20 + [3.0] * 3  # a few very slow steps move the mean, not the median
    with HistoryDB() as db:
        db.add_record(record("ratea1", [case(workload="vae", median=0.1)]))
        db.add_record(record("rateb1", [case(workload="vae", step_times=slow_tail)]))
        db.add_record(record("gena1", [case(workload="gpt2", mode="generate", dataset_size=0,
                                            generation=Generation(decode_tokens_per_s_total=24.0))]))
    assert main(["compare", "ratea1", "rateb1", "gena1"]) == 0
    out = capsys.readouterr().out
    a, b = (db_case.throughput() for db_case in (case(workload="vae", median=0.1),
                                                   case(workload="vae", step_times=slow_tail)))
    header = next(line for line in out.splitlines() if "samples/s" in line)
    assert "CPU epoch" in header  # the epoch stays, as published, beside the rate
    row_b = next(line for line in out.splitlines() if "rateb1" in line)
    assert f"{a:,.0f}" in out and f"{b:,.0f}" in row_b and f"{b / a:.2f}x" in row_b
    assert "proj." in row_b
    generation = next(line for line in out.splitlines() if "gena1" in line)
    assert generation.split()[-1] == "24" and "decode tokens/s" in out
    assert "no epoch size" not in out
    assert "each device's rate" in " ".join(out.split())
