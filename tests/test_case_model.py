"""The case model every subcommand shares: the worker spec goes to JSON and back in one place,
typed (run options, case, the work's own settings dataclass), and each subcommand's worker
function, named by the subcommand, resolves (a renamed function fails here, not in a worker)."""

from __future__ import annotations

import pytest

from accelbench.devices import DeviceSet
from accelbench.engine.case import Case, WorkerSpec
from accelbench.engine.launch import worker_function
from accelbench.engine.runner import RunWork
from accelbench.options.values import build_run_options
from accelbench.parity.check import CheckSettings, CheckWork
from accelbench.probes.work import ProbeSettings, ProbeWork
from accelbench.scale.launcher import RANK_WORKER


def test_worker_spec_round_trips_through_json() -> None:
    devices = DeviceSet.current()
    cpu = devices.select("cpu")[0]
    options = build_run_options("mnist", "cpu", "train", size="tiny", steps=3, precision="bf16")
    case = Case("mnist", "train", cpu, 8, "bf16", "", True)
    spec = WorkerSpec.create(CheckWork.worker, options, case, CheckSettings("fp64", 4))
    back = WorkerSpec.from_json(spec.to_json())
    assert back == spec
    assert back.run_options() == options  # typed: a RunOptions, not a dict
    assert back.rebuild_case(devices) == case
    assert back.settings_as(CheckSettings) == CheckSettings("fp64", 4)


def test_a_spec_without_options_or_case_says_so() -> None:
    spec = WorkerSpec.from_json(WorkerSpec.create(
        ProbeWork.worker, settings=ProbeSettings("cpu", ["matmul"], [], False)).to_json())
    assert spec.settings_as(ProbeSettings).features == ["matmul"]
    with pytest.raises(ValueError, match="no run options"):
        spec.run_options()
    with pytest.raises(ValueError, match="no case"):
        spec.rebuild_case(DeviceSet.current())


@pytest.mark.parametrize("work", [RunWork.worker, CheckWork.worker, ProbeWork.worker, RANK_WORKER])
def test_each_subcommand_names_a_worker_function_that_exists(work: str) -> None:
    assert callable(worker_function(work))


def test_a_worker_function_outside_accelbench_is_refused() -> None:
    with pytest.raises(ValueError, match="accelbench.MODULE:FUNCTION"):
        worker_function("os:system")
