"""The case model every subcommand shares: the spec goes to JSON and back in one place, typed
(run options, a real Case, the work's own settings dataclass, the files a worker loads, a rank's
plan), and each subcommand's worker function, named by the subcommand, resolves (a renamed function
fails here, not in a worker)."""

from __future__ import annotations

import json

import pytest

from accelbench.devices import DeviceSet
from accelbench.engine.case import Case
from accelbench.engine.launchers.base import worker_function
from accelbench.engine.runner import RunWork
from accelbench.engine.spec import CaseSpec, RankPlan
from accelbench.options.values import build_run_options
from accelbench.parity.check import CheckSettings, CheckWork
from accelbench.probes.work import ProbeSettings, ProbeWork
from accelbench.scale.work import ScaleWork


def test_case_spec_round_trips_through_json() -> None:
    """Issue 27 (one typed spec): the case is a real Case and the settings a typed dataclass on
    both sides, not dicts the work rebuilds by hand."""
    devices = DeviceSet.current()
    cpu = devices.select("cpu")[0]
    options = build_run_options("mnist", "cpu", "train", size="tiny", steps=3, precision="bf16")
    case = Case(workload="mnist", mode="train", device=cpu, batch_size=8, precision="bf16",
                channels_last=True)
    spec = CaseSpec(CheckWork.worker, options, case, CheckSettings("fp64", 4), ("/tmp/m.pickle",),
                    RankPlan("gloo", "fsdp", 90.0, "/tmp/ranks"))
    back = CaseSpec.from_json(spec.to_json(), devices)
    assert back == spec
    assert isinstance(back.case, Case) and back.case.device is not None
    assert back.run_options() == options  # typed: a RunOptions, not a dict
    assert back.settings_as(CheckSettings) == CheckSettings("fp64", 4)
    with pytest.raises(ValueError, match="not ProbeSettings"):
        back.settings_as(ProbeSettings)
    # the settings travel with their class, so the worker gets the dataclass back, not a dict
    assert json.loads(spec.to_json())["settings"]["type"] == "accelbench.parity.check:CheckSettings"


def test_a_spec_without_options_or_case_says_so() -> None:
    spec = CaseSpec.from_json(CaseSpec(
        ProbeWork.worker, settings=ProbeSettings("cpu", ["matmul"], [], False)).to_json())
    assert spec.settings_as(ProbeSettings).features == ["matmul"]
    with pytest.raises(ValueError, match="no run options"):
        spec.run_options()
    with pytest.raises(ValueError, match="no case"):
        spec.the_case()


def test_settings_outside_accelbench_are_refused() -> None:
    text = json.dumps({"work": RunWork.worker, "settings": {"type": "os:stat_result", "fields": {}}})
    with pytest.raises(ValueError, match="accelbench dataclass"):
        CaseSpec.from_json(text)


@pytest.mark.parametrize("work", [RunWork.worker, CheckWork.worker, ProbeWork.worker,
                                  ScaleWork.worker])
def test_each_subcommand_names_a_worker_function_that_exists(work: str) -> None:
    assert callable(worker_function(work))


def test_a_worker_function_outside_accelbench_is_refused() -> None:
    with pytest.raises(ValueError, match="accelbench.MODULE:FUNCTION"):
        worker_function("os:system")
