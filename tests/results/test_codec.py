"""Issue 35: one codec (``accelbench.codec``) with a strict switch. Strict for what this accelbench
writes for itself (options, worker specs, rank reports): a key that is no field is an error naming
its path. Lenient for stored records: an old or newer file loads, its unknown keys skipped and
counted (``RunRecord.unknown_keys``); the blocks written for readers are not counted."""

from __future__ import annotations

import json

import pytest

from accelbench.codec import DecodeError, decode
from accelbench.devices import DeviceSet
from accelbench.engine.case import Case
from accelbench.engine.launchers.ranks import RankReport
from accelbench.engine.spec import CaseSpec
from accelbench.errors import UsageError
from accelbench.options import RunOptions, StopRule
from accelbench.results import CaseResult, Parity, RunRecord


def test_strict_names_an_unknown_key_by_its_path() -> None:
    data = RunOptions(stop=StopRule("steps", 3)).to_dict()
    data["stop"]["bogus"] = 1
    with pytest.raises(ValueError, match=r"^RunOptions\.stop\.bogus: StopRule has no field 'bogus'"):
        RunOptions.from_dict(data)
    with pytest.raises(DecodeError, match=r"field 'RunOptions\.seed' has the wrong type: str"):
        RunOptions.from_dict({**RunOptions().to_dict(), "seed": "five"})


def test_a_spec_is_strict_and_its_case_travels_by_device_name() -> None:
    cpu = DeviceSet.current().select("cpu")[0]
    spec = CaseSpec("accelbench.engine.runner:run_from_spec", RunOptions(),
                    Case(workload="mnist", mode="train", device=cpu, batch_size=4, size="tiny"))
    data = json.loads(spec.to_json())
    assert data["case"]["device"] == "cpu" and data["case"]["size"] == "tiny"
    assert CaseSpec.from_json(json.dumps(data)) == spec
    data["case"]["bogus"] = True
    with pytest.raises(ValueError, match=r"CaseSpec\.case\.bogus: Case has no field"):
        CaseSpec.from_json(json.dumps(data))


def test_a_rank_report_carries_its_result_as_a_result_file_case() -> None:
    result = CaseResult(workload="mnist", mode="train", device="cpu", batch_size=4,
                        step_times=[0.01, 0.02])
    report = RankReport(rank=1, world_size=2, nosync_step_times=[0.01], result=result)
    data = json.loads(json.dumps(report.to_dict()))
    assert "derived" in data["result"]  # written as a result file's case is
    back = RankReport.from_dict(data)
    assert back.result is not None and back.result.step_times == [0.01, 0.02]
    assert back.nosync_step_times == [0.01] and back.world_size == 2
    with pytest.raises(ValueError, match=r"RankReport\.bogus"):
        RankReport.from_dict({**data, "bogus": 1})


def test_lenient_records_skip_and_count_unknown_keys() -> None:
    case = CaseResult(workload="mnist", mode="train", device="cpu", batch_size=4,
                      step_times=[0.01] * 3, parity=Parity(verdict="pass"))
    record = RunRecord(run_id="r", created_at="2026-01-01", accelbench_version="0", cases=[case])
    data = json.loads(json.dumps(record.to_dict()))
    assert RunRecord.from_dict(data).unknown_keys == []  # schema_version, derived: expected
    data["from_the_future"] = 1
    data["cases"][0]["new_figure"] = 2.0
    data["cases"][0]["parity"]["new_judgement"] = "x"
    loaded = RunRecord.from_dict(data)
    assert sorted(loaded.unknown_keys) == ["cases[0].new_figure", "cases[0].parity.new_judgement",
                                           "from_the_future"]
    assert loaded.cases[0].step_times == [0.01] * 3 and "from_the_future" not in loaded.to_dict()
    # a wrong type is still an error that names the field, in the file's own words
    data["cases"][0]["batch_size"] = "four"
    with pytest.raises(UsageError, match=r"result field 'cases\[0\]\.batch_size' has the wrong type"):
        RunRecord.from_dict(data)


def test_lenient_and_strict_read_the_same_annotations() -> None:
    assert decode(tuple[int, ...], [1, 2]) == (1, 2)
    assert decode(dict[str, float], {"a": 1}, strict=False) == {"a": 1}
    with pytest.raises(DecodeError, match="must be a list of 2 values"):
        decode(tuple[str, float], ["a"], strict=False, where="x")
