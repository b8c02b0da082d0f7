"""--repeat N: interleaved rounds of fresh worker processes, every process kept, honest intervals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest_report import assert_one_line_error, case

from accelbench.devices import DeviceSet
from accelbench.engine import runner
from accelbench.engine.case import plan
from accelbench.engine.repeat import interleaved, merge_repeats
from accelbench.errors import UsageError
from accelbench.options import RunOptions, StopRule
from accelbench.results import CaseResult, RunRecord
from accelbench.results.process import process_step_times


def test_rounds_interleave_cases() -> None:
    assert list(interleaved(2, 3)) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]


def test_run_plan_runs_each_case_once_per_round_and_keeps_every_process(monkeypatch) -> None:
    calls: list[tuple[str, int]] = []

    def fake_launch(work: runner.RunWork, launcher: object, case: runner.Case,
                    progress: object) -> CaseResult:
        calls.append((case.mode, case.batch_size))
        result = case_for(case)
        if case.mode == "train" and len(calls) == 1:
            result.batch_size = 32  # --auto-batch halved it in the first round
        return result

    def case_for(c: runner.Case) -> CaseResult:
        return case(mode=c.mode, batch_size=c.batch_size, median=0.1 + 0.01 * len(calls), seed=len(calls))

    monkeypatch.setattr(runner.RunWork, "launch", fake_launch)
    monkeypatch.setattr(runner, "new_record", lambda *a: RunRecord("r", "2025-01-01", "0"))
    options = RunOptions(modes=("train", "eval"), repeat=3, stop=StopRule("steps", 3))
    devices = DeviceSet.current()
    cases = plan(options, devices)
    saved: list[int] = []
    record = runner.run_plan(options, devices, cases, [], on_case=lambda r: saved.append(len(r.cases)))
    assert [mode for mode, _ in calls] == ["train", "eval"] * 3
    assert [batch for mode, batch in calls if mode == "train"] == [64, 32, 32]
    assert saved == [1, 2, 2, 2, 2, 2]  # saved after every process, one result per case
    assert [len(c.repeats) for c in record.cases] == [3, 3]
    assert len(process_step_times(record.cases[0])) == 3
    assert len(record.cases[0].step_times) == 3 * 30  # the pooled view


def test_projected_epoch_interval_includes_the_spread_between_processes() -> None:
    # Three processes each tight around its own speed (0.10, 0.12, 0.14 s a step): the pooled
    # samples' t interval is about +-3%, far narrower than the run-to-run spread.
    merged = merge_repeats([case(median=m, seed=i) for i, m in enumerate((0.10, 0.12, 0.14))])
    scale = merged.dataset_size / merged.batch_size
    epoch, low, high, kind = merged.epoch_time()
    assert kind == "projected" and abs(epoch / scale - 0.12) < 0.002
    assert low < 0.10 * scale and high > 0.14 * scale
    pooled = merged.summary()
    assert pooled.mean_ci_high < 0.125  # what the interval was before repeats counted


def test_repeat_must_be_positive_and_needs_processes() -> None:
    with pytest.raises(UsageError, match="--repeat"):
        RunOptions(repeat=0)
    with pytest.raises(UsageError, match="--isolation process"):
        RunOptions(repeat=2, isolation="none")


def test_repeat_in_real_worker_processes(cli, tmp_path: Path) -> None:
    out = tmp_path / "rep.json"
    result = cli("run", "mnist", "--size", "tiny", "--device", "cpu", "--mode", "train", "--steps", "3",
                 "--warmup", "1", "--repeat", "2", "--quiet", "-o", str(out))
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["options"]["repeat"] == 2
    (only,) = data["cases"]
    assert len(only["repeats"]) == 2 and all(len(r["step_times"]) == 3 for r in only["repeats"])
    assert len(only["step_times"]) == 6
    compared = cli("compare", str(out), str(out), env={"COLUMNS": "400"})  # no wrapping in cells
    assert compared.returncode == 0, compared.stderr
    assert "2 vs 2 processes" in compared.stdout
    assert "can't tell" in compared.stdout or "same within noise" in compared.stdout
    assert "x faster" not in compared.stdout and "x slower" not in compared.stdout
    assert_one_line_error(cli("run", "mnist", "--repeat", "0"), "--repeat")


def test_throughput_interval_with_repeats_is_the_spread_between_processes() -> None:
    merged = merge_repeats([case(median=m, seed=i) for i, m in enumerate((0.10, 0.12, 0.14))])
    low, high = merged.throughput_ci()
    # Per-process throughputs run from 64/0.14 = 457 to 64/0.10 = 640 samples/s; the pooled
    # median's interval (about 530-545) would hide that.
    assert low < 470 and high > 620


#: One process's entry in ``repeats`` as result files before the typed run stored it.
_STORED_PROCESS = {"status": "ok", "error": "", "batch_size": 64, "step_times": [0.1, 0.12],
                   "steps_per_sample": 1, "epoch_times": [], "measured_steps": 2,
                   "measured_time_s": 0.22, "input_wait_s": 0.0, "time_to_first_step_s": 0.5,
                   "warmup_time_s": 0.5, "peak_memory_bytes": 1000, "median_step_s": 0.11,
                   "mean_step_s": 0.11}


def test_each_repeat_process_is_a_typed_run_stored_as_before(tmp_path: Path) -> None:
    """Issue 27 (one typed spec): each --repeat process's record is a ProcessRun, not a dict;
    its stored keys are the ones result files have always held (plus tpot_s, protocol_rate and
    sustained, null where the case has none), and a file written before the type loads into it."""
    from accelbench.results import ProcessRun
    from accelbench.store.jsonfile import load_record, save_record

    merged = merge_repeats([case(median=m, seed=i) for i, m in enumerate((0.10, 0.12))])
    assert all(isinstance(run, ProcessRun) for run in merged.repeats)
    assert merged.repeats[0].median_step_s == pytest.approx(0.10, rel=0.05)
    stored = merged.to_dict()["repeats"][0]
    assert set(stored) == set(_STORED_PROCESS) | {"tpot_s", "protocol_rate", "sustained"}
    assert stored["tpot_s"] is None and stored["protocol_rate"] is None and stored["sustained"] is None
    path = tmp_path / "old.json"
    old = RunRecord("r", "2025-01-01", "0", cases=[case()])
    data = old.to_dict()
    data["cases"][0]["repeats"] = [_STORED_PROCESS, {**_STORED_PROCESS, "status": "crashed"}]
    path.write_text(json.dumps(data))
    loaded = load_record(path).cases[0]
    assert loaded.repeats == [ProcessRun(**_STORED_PROCESS),
                              ProcessRun(**{**_STORED_PROCESS, "status": "crashed"})]
    assert process_step_times(loaded) == pytest.approx([0.102])  # the crashed one is left out
    save_record(load_record(path), tmp_path / "again.json")
    assert load_record(tmp_path / "again.json").cases[0].repeats == loaded.repeats
