"""Result files: round trip, schema versions, wrong types, corrupt files, atomic writes."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.errors import UsageError
from accelbench.results import SCHEMA_VERSION, CaseResult, RunRecord
from accelbench.store.jsonfile import load_record, save_record


def record() -> RunRecord:
    case = CaseResult(workload="mnist", mode="train", device="cpu", batch_size=64,
                      step_times=[0.1, 0.11, 0.09, 0.1, 0.12], dataset_size=60000,
                      steps_per_epoch=938, peak_memory_bytes=123, metrics={"knn_top1": 0.3})
    failed = CaseResult(workload="mnist", mode="eval", device="cpu", batch_size=1000,
                        status="oom", error="OutOfMemoryError: boom")
    return RunRecord(run_id="abc", created_at="2026-01-01T00:00:00+00:00",
                     accelbench_version="0.1.0", environment={"machine": {"hostname": "h"}},
                     cases=[case, failed])


def test_round_trip_keeps_raw_samples_and_derived_figures(tmp_path: Path) -> None:
    path = save_record(record(), tmp_path / "r.json")
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    derived = data["cases"][0]["derived"]
    assert derived["throughput_samples_per_s"] == pytest.approx(64 / 0.1)
    assert derived["epoch_time_kind"] == "projected"
    assert derived["epoch_time_s"] == pytest.approx(60000 / 64 * 0.104)
    loaded = load_record(path)
    assert loaded.cases[0].step_times == [0.1, 0.11, 0.09, 0.1, 0.12]
    assert loaded.cases[1].status == "oom" and loaded.cases[1].error == "OutOfMemoryError: boom"
    assert loaded.to_dict() == record().to_dict()


def test_newer_schema_is_a_clear_error(tmp_path: Path) -> None:
    data = record().to_dict()
    data["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "new.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match="newer than this accelbench reads"):
        load_record(path)


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d["cases"][0].update(batch_size="64"), "batch_size"),
    (lambda d: d["cases"][0].update(step_times=[0.1, "x"]), "step_times"),
    (lambda d: d["cases"][0].update(status="great"), "status"),
    (lambda d: d.update(cases={}), "cases"),
    (lambda d: d.pop("run_id"), "run_id"),
    (lambda d: d["cases"][0].pop("workload"), "workload"),
])
def test_wrong_types_are_named(tmp_path: Path, mutate, message: str) -> None:
    data = record().to_dict()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match=message):
        load_record(path)


def test_truncated_file_is_a_clear_error(tmp_path: Path) -> None:
    path = save_record(record(), tmp_path / "r.json")
    path.write_text(path.read_text()[:200])
    with pytest.raises(UsageError, match="not valid JSON"):
        load_record(path)


def test_save_replaces_atomically_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("old")
    save_record(record(), path)
    assert load_record(path).run_id == "abc"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=5),
                    lambda children: st.lists(children, max_size=3)
                    | st.dictionaries(st.text(max_size=8), children, max_size=4), max_leaves=20))
def test_loader_never_crashes_on_arbitrary_json(tmp_path: Path, payload: object) -> None:
    path = tmp_path / "fuzz.json"
    path.write_text(json.dumps(payload))
    with contextlib.suppress(UsageError):
        load_record(path)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(list(CaseResult.__dataclass_fields__)),
                       st.none() | st.integers() | st.text(max_size=3) | st.lists(st.integers()),
                       max_size=6))
def test_loader_rejects_or_accepts_mutated_cases_cleanly(tmp_path: Path, changes: dict) -> None:
    data = record().to_dict()
    data["cases"][0].update(changes)
    path = tmp_path / "fuzz.json"
    path.write_text(json.dumps(data))
    try:
        loaded = load_record(path)
        loaded.cases[0].to_dict()
    except UsageError:
        pass
