"""Result schema 2: typed records, the upgrade of schema-1 files and databases, cached statistics.

The schema-1 fixtures in tests/data/v1/ were written by accelbench before schema 2 existed (real
``run --profile``, ``check``, ``probe --feature fft`` and ``scale`` commands, and the history
database those commands filled), so the upgrade is tested against what users really have on disk.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest_report import assert_one_line_error

from accelbench.errors import UsageError
from accelbench.results import (
    SCHEMA_VERSION,
    CaseResult,
    DeviceProbe,
    Parity,
    RunRecord,
    ScaleFigures,
)
from accelbench.results import records as records_module
from accelbench.results.schema import upgrade
from accelbench.store.history import HistoryDB
from accelbench.store.jsonfile import load_record, save_record

V1 = Path(__file__).parents[1] / "data" / "v1"


def v1(name: str) -> dict[str, Any]:
    return json.loads((V1 / f"{name}.json").read_text())


# --- schema-1 files -------------------------------------------------------------------------------
def test_a_v1_run_file_upgrades_with_every_figure_in_its_typed_field(tmp_path: Path) -> None:
    raw = v1("run")
    record = load_record(V1 / "run.json")
    assert [c.mode for c in record.cases] == ["train", "eval"] and record.probes == []
    for case, old in zip(record.cases, raw["cases"], strict=True):
        extra = old["extra"]
        assert case.step_times == old["step_times"]
        assert case.throughput() == pytest.approx(old["derived"]["throughput_samples_per_s"])
        assert case.backend_flags == extra["backend_flags"]
        assert case.memory_is_lower_bound is extra["memory_is_lower_bound"] is False
        assert case.energy.reason == extra["energy"]["reason"] and case.energy.joules is None
        assert case.energy.seconds == extra["energy"]["seconds"]
        assert case.flops.to_dict() == {**case.flops.to_dict(), **extra["flops"]}
        assert case.flops.fraction_of_peak == extra["flops"]["fraction_of_peak"] > 0
        assert case.sensors.start.cpu_mhz == extra["sensors"]["start"]["cpu_mhz"]
        figures, ceilings = case.profile.figures, case.profile.ceilings
        assert figures.kernels_per_step == extra["profile"]["kernels_per_step"]
        assert [list(op) for op in figures.top_ops] == extra["profile"]["top_ops"]
        assert ceilings.matmul_flops == extra["profile"]["ceilings"]["matmul_flops"]
        assert case.profile.error == ""
    # Saved again, it is a schema-2 file without ``extra`` that reads back the same.
    saved = json.loads(save_record(record, tmp_path / "again.json").read_text())
    assert saved["schema_version"] == SCHEMA_VERSION == 2
    assert "extra" not in saved["cases"][0] and saved["cases"][0]["flops"] == record.cases[0].flops.to_dict()
    assert load_record(tmp_path / "again.json").to_dict() == record.to_dict()


def test_a_v1_check_file_keeps_its_parity_verdict_and_curves() -> None:
    raw = v1("check")
    record = load_record(V1 / "check.json")
    assert [c.precision for c in record.cases] == ["fp32", "bf16"]
    for case, old in zip(record.cases, raw["cases"], strict=True):
        parity, stored = case.parity, old["extra"]["parity"]
        assert isinstance(parity, Parity) and parity.verdict == stored["verdict"] == "pass"
        assert (parity.steps, parity.candidate, parity.reference) == (
            stored["steps"], stored["candidate"], stored["reference"])
        assert parity.tolerance.passed == stored["tolerance"]["pass"]
        assert parity.tolerance.drift == stored["tolerance"]["drift"]
        assert parity.max_rel_loss_diff == stored["max_rel_loss_diff"]
        assert parity.first_bad_step is None and parity.reference_kind == "cpu-fp64"
    assert record.cases[1].parity.to_dict()["tolerance"] == {"pass": 0.05, "drift": 0.2}


def test_a_v1_probe_file_becomes_per_device_probes_not_a_fake_case() -> None:
    old_case = v1("probe")["cases"][0]
    record = load_record(V1 / "probe.json")
    assert record.kind == "probe" and record.cases == []
    assert record.probes == [DeviceProbe(device="cpu", device_name=old_case["device_name"],
                                         threads=old_case["threads"],
                                         cells={"fft": record.probes[0].cells["fft"]})]
    cell = record.probes[0].cells["fft"]
    assert cell.to_dict() == old_case["extra"]["probe"]["fft"] and cell.status == "works"


def test_a_v1_scale_file_keeps_its_world_sizes_and_ranks() -> None:
    raw = v1("scale")
    record = load_record(V1 / "scale.json")
    for case, old in zip(record.cases, raw["cases"], strict=True):
        scale, stored = case.scale, old["extra"]["scale"]
        assert isinstance(scale, ScaleFigures)
        assert scale.to_dict() == {**scale.to_dict(), **stored, "ranks": scale.to_dict()["ranks"]}
        assert [r.to_dict() for r in scale.ranks] == stored["ranks"]
    assert [c.scale.world_size for c in record.cases] == [1, 2]
    assert record.cases[1].scale.efficiency_baseline_world_size == 1


def test_every_v1_extra_key_lands_in_its_field() -> None:
    """The keys the fixtures do not hold: failures, sweeps, bench() and torchrun's output."""
    case = {"workload": "mnist", "mode": "train", "device": "cpu", "batch_size": 4, "status": "nan",
            "extra": {"oom_batch_sizes": [16, 8], "nonfinite_step": 7, "traceback": "Traceback ...",
                      "stderr_tail": ["boom"], "isolation": "inline: a lambda", "skipped": True,
                      "scale": {"world_size": 2}, "torchrun_output_tail": ["rank 1 died"],
                      "profile": {"error": "RuntimeError: busy"}, "someone_elses_key": 1}}
    data = {"schema_version": 1, "run_id": "r", "created_at": "t", "accelbench_version": "0",
            "cases": [case]}
    (loaded,) = RunRecord.from_dict(data).cases
    assert loaded.oom_batch_sizes == [16, 8] and loaded.nonfinite_step == 7
    assert loaded.traceback == "Traceback ..." and loaded.stderr_tail == ["boom"]
    assert loaded.isolation == "inline: a lambda" and loaded.skipped is True
    assert loaded.scale.output_tail == ["rank 1 died"]
    assert loaded.profile.error == "RuntimeError: busy" and loaded.profile.figures is None
    assert "someone_elses_key" not in json.dumps(loaded.to_dict())
    assert data["cases"][0]["extra"]["isolation"] == "inline: a lambda"  # the input is untouched
    assert upgrade(data)["schema_version"] == 2


# --- a schema-1 history database ------------------------------------------------------------------
@pytest.fixture
def v1_db(tmp_path: Path) -> Path:
    """A copy of the history the schema-1 commands filled (opening it migrates it in place)."""
    return Path(shutil.copy(V1 / "history.sqlite", tmp_path / "history.sqlite"))


def test_a_v1_history_migrates_in_place_and_reads_as_the_files_do(v1_db: Path) -> None:
    with HistoryDB(v1_db, create=False) as db:
        for name in ("run", "check", "probe", "scale"):
            stored = db.get(v1(name)["run_id"])
            assert stored.to_dict() == load_record(V1 / f"{name}.json").to_dict(), name
        rows = {r.kind: r for r in db.list_runs()}
    assert rows["probe"].devices == ("cpu",) and rows["probe"].workloads == ()
    assert rows["probe"].statuses == {"works": 1}
    assert rows["run"].workloads == ("mnist",) and rows["run"].statuses == {"ok": 2}
    conn = sqlite3.connect(v1_db)
    schemas = dict(conn.execute("SELECT kind, record_schema FROM runs").fetchall())
    fake_cases = conn.execute("SELECT count(*) FROM cases WHERE workload = 'features'").fetchone()[0]
    conn.close()
    # The probe moved to its own table (written as schema 2); the other runs keep their stored
    # JSON and are upgraded when read.
    assert schemas == {"run": 1, "check": 1, "probe": 2, "scale": 1} and fake_cases == 0


def test_history_and_compare_work_on_a_v1_history_through_the_cli(cli, v1_db: Path) -> None:
    listing = cli("history", "--db", str(v1_db), "--workload", "mnist", "--mode", "train")
    assert listing.returncode == 0, listing.stderr
    assert "ad527c4c81b4" in listing.stdout and "samples/s over time" in listing.stdout
    run_id = v1("run")["run_id"]
    compared = cli("compare", run_id, str(V1 / "run.json"), "--db", str(v1_db))
    assert compared.returncode == 0, compared.stderr
    assert "mnist" in compared.stdout and "train" in compared.stdout


# --- what loading refuses -------------------------------------------------------------------------
def test_a_newer_schema_is_a_one_line_error(cli, tmp_path: Path) -> None:
    data = v1("run")
    data["schema_version"] = 3
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    assert_one_line_error(cli("import", str(path), "--db", str(tmp_path / "h.sqlite")),
                          "schema version 3", "newer than this accelbench reads (<= 2)")


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d["cases"][0]["parity"]["tolerance"].update(drift="x"),
     "cases[0].parity.tolerance.drift' has the wrong type: str (expected number)"),
    (lambda d: d["cases"][0]["parity"].update(verdict="great"),
     "parity verdict 'great' is unknown; allowed: pass, drift"),
    (lambda d: d["cases"][0]["parity"].update(candidate=[1.0, "x"]),
     "cases[0].parity.candidate[1]' has the wrong type: str (expected number or null)"),
    (lambda d: d["cases"][0].update(energy={"joules": "12"}), "cases[0].energy.joules'"),
    (lambda d: d["cases"][0].update(backend_flags={"cudnn_benchmark": 1}),
     "cases[0].backend_flags.cudnn_benchmark' has the wrong type: int"),
    (lambda d: d["cases"][0].update(scale={"world_size": 2, "ranks": [{"rank": "0"}]}),
     "cases[0].scale.ranks[0].rank'"),
    (lambda d: d["cases"][0].update(scale={"nnodes": 1}), "cases[0].scale.world_size' is missing"),
    (lambda d: d.update(probes=[{"device": "cpu", "cells": {"fft": {"status": "fine"}}}]),
     "probe status 'fine' is unknown"),
])
def test_a_typed_field_with_the_wrong_type_is_named(tmp_path: Path, mutate, field: str) -> None:
    data = json.loads(json.dumps(load_record(V1 / "check.json").to_dict()))
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError) as error:
        load_record(path)
    assert field in str(error.value) and "\n" not in str(error.value)


# --- statistics computed once, never stale --------------------------------------------------------
def test_statistics_are_computed_once_and_follow_the_samples(monkeypatch) -> None:
    calls: list[int] = []
    real = records_module.summarize

    def counting(samples: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(samples))
        return real(samples, *args, **kwargs)

    monkeypatch.setattr(records_module, "summarize", counting)
    case = CaseResult(workload="w", mode="train", device="cpu", batch_size=10,
                      step_times=[0.1] * 8, dataset_size=100)
    first = case.throughput()
    case.summary(), case.throughput_ci(), case.epoch_time(), case.to_dict()
    assert first == pytest.approx(100.0) and calls == [8]  # one summary for every figure
    case.step_times = [0.2] * 8  # assigned after construction, as the runner and merge do
    assert case.throughput() == pytest.approx(50.0)
    case.step_times.append(0.2)  # appended in place, as the timed loop does
    assert case.summary().n == 9
    case.step_times[0] = 10.0  # changed in place: the mean moves, the cached one must not stay
    assert case.summary().max == 10.0 and case.epoch_time()[0] > 0.2 * 10
    assert calls == [8, 8, 9, 9]
