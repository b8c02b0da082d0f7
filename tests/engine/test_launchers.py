"""Issue 27, one worker and three launchers: inline, process and torchrun are one family behind
one protocol, so run's and check's own work run as torchrun ranks, and scale's inline, with no
code of their own; every rank measures through the same measure_case, and the ranks are merged
by one typed rule. Issue 35: the launcher is chosen in one place (launchers/choose.py) from what
the options ask (``--isolation torchrun --nproc N`` for run and check), and a rank's hooks are
passed explicitly (the spec's RankPlan). Real torchrun processes over gloo on the CPU."""

from __future__ import annotations

import math

import pytest
import torch.distributed as dist

from accelbench.devices import DeviceSet
from accelbench.engine.case import plan
from accelbench.engine.driver import drive
from accelbench.engine.launchers import torchrun
from accelbench.engine.launchers.backends import check_world
from accelbench.engine.launchers.choose import LaunchPlan, one_launcher
from accelbench.engine.launchers.inline import InlineLauncher
from accelbench.engine.launchers.process import ProcessLauncher
from accelbench.engine.launchers.torchrun import TorchrunLauncher
from accelbench.engine.runner import launch_plan, run_plan
from accelbench.errors import UsageError
from accelbench.measure.loop.stop import MIN_SAMPLES, StopRule
from accelbench.options import RunOptions
from accelbench.options.check import CheckOptions
from accelbench.options.scale import ScaleOptions
from accelbench.options.values import build_run_options
from accelbench.parity.check import CheckWork
from accelbench.results import RunRecord
from accelbench.scale.work import run_scale

TINY = {"workloads": ("mnist",), "size": "tiny", "device": "cpu"}
#: Two ranks under torchrun, one thread each.
TWO_RANKS = {"isolation": "torchrun", "nproc": 2, "threads": 1, "case_timeout": 150}
#: mnist's tiny training set: each of 2 ranks works through half of it.
TINY_EPOCH = 64


def test_the_launcher_is_chosen_from_what_the_options_ask() -> None:
    """One place picks the launcher: --isolation none, process (warm where the options share a
    worker, and never with --repeat) or torchrun; --nproc N goes with torchrun only."""
    def chosen(**options: object) -> LaunchPlan:
        return launch_plan(RunOptions(**TINY, **options))

    assert isinstance(one_launcher(chosen(isolation="none")), InlineLauncher)
    process = chosen(isolation="process", case_timeout=9)
    assert (process.isolation, process.timeout, process.warm) == ("process", 9, False)
    assert one_launcher(process) == ProcessLauncher(9)
    assert chosen(warm_worker=True).warm and not chosen(repeat=2).warm
    assert one_launcher(chosen(**TWO_RANKS)) == TorchrunLauncher(150)
    assert one_launcher(LaunchPlan("process", resume=True)) == ProcessLauncher(1800.0, resume=True)
    with pytest.raises(UsageError, match="--nproc 2 .* needs --isolation torchrun"):
        RunOptions(**TINY, nproc=2)
    with pytest.raises(ValueError, match="isolation 'thread' is unknown"):
        LaunchPlan("thread")
    cpu = DeviceSet.current().select("cpu")[0]
    assert check_world(DeviceSet.current(), cpu, 2) == "gloo"
    with pytest.raises(UsageError, match="cannot run cpu processes over torch.distributed"):
        check_world(DeviceSet.current(), cpu, 2, backend="no-such-backend")


def test_run_runs_under_torchrun_with_no_code_of_its_own(accelbench_home) -> None:
    """run's work under --isolation torchrun --nproc 2: each case is two DDP ranks measured by
    measure_case; the time budget became one step count both ranks agreed on; the case is the
    slowest rank at each step, with a no-sync phase of as many steps."""
    options = build_run_options("mnist", "cpu", "train", size="tiny", time_budget=0.3, warmup=2,
                                **TWO_RANKS)
    devices = DeviceSet.current()
    record = run_plan(options, devices, plan(options, devices), ["accelbench", "run"])
    (case,) = record.cases
    assert case.status == "ok", case.error
    scale = case.scale
    assert (scale.world_size, scale.backend, scale.strategy) == (2, "gloo", "ddp")
    one, two = scale.ranks
    assert (one.rank, two.rank, one.status, two.status) == (0, 1, "ok", "ok")
    assert len(one.step_times) == len(two.step_times) == case.measured_steps >= MIN_SAMPLES
    assert case.step_times == [max(a, b) for a, b in zip(one.step_times, two.step_times, strict=True)]
    assert len(one.nosync_step_times) == case.measured_steps
    assert case.dataset_size == TINY_EPOCH // 2 and case.steps_per_sample == 1
    assert scale.global_throughput == pytest.approx(2 * scale.per_process_throughput)
    assert isinstance(scale.comm_fraction, float)
    assert case.sensors is None and case.energy is None and case.flops is None  # not per rank


def test_check_runs_under_torchrun_with_no_code_of_its_own() -> None:
    """check's work, given the torchrun launcher: each rank checks the case's parity; the case
    is ok only when every rank's is, and keeps rank 0's verdict."""
    devices = DeviceSet.current()
    options = CheckOptions(run=RunOptions(**TINY, **TWO_RANKS), steps=2)
    record = drive(CheckWork(options, devices), plan(options.run, devices),
                   RunRecord("r", "2025-01-01", "0"), launch=LaunchPlan.of_run(options.run))
    (case,) = record.cases
    assert case.status == "ok", case.error
    assert case.parity is not None and case.parity.verdict == "pass"
    assert [rank.status for rank in case.scale.ranks] == ["ok", "ok"]


def test_scale_runs_inline_with_no_code_of_its_own(monkeypatch) -> None:
    """scale with isolation none: a world of one in this process, measured by the same rank
    context and merged by the same rule, and no torchrun started; the group is left after."""
    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("torchrun was started for an inline scale")

    monkeypatch.setattr(torchrun, "in_torchrun", started)
    options = ScaleOptions.of("mnist", (1,), size="tiny", stop=StopRule("steps", 3), warmup_steps=1,
                              isolation="none")
    record = run_scale(options, ["accelbench", "scale"])
    (case,) = record.cases
    assert case.status == "ok", case.error
    scale = case.scale
    assert scale.world_size == 1 and scale.efficiency == pytest.approx(1.0)
    assert [rank.status for rank in scale.ranks] == ["ok"]
    assert case.step_times == scale.ranks[0].step_times and len(case.step_times) == 3
    assert len(scale.ranks[0].nosync_step_times) == 3 and math.isfinite(scale.comm_fraction)
    assert record.options.scale.run.isolation == "none"
    assert not dist.is_initialized()


@pytest.mark.parametrize("kind", ["sustained", "epochs"])
def test_a_rank_refuses_a_stop_rule_its_world_could_not_keep_in_step(kind: str) -> None:
    """After warm-up a rank times single steps, keeps a step count, and refuses what would end
    on different steps in different ranks (a hang in their collectives), as the case's status."""
    from accelbench.engine.spec import RankPlan
    from accelbench.measure.loop.timing import Timing

    hooks, warm = RankPlan("gloo").hooks(), Timing(steps_per_sample=8)
    assert hooks.agree(StopRule("steps", 4), warm, None) == StopRule("steps", 4)
    assert warm.steps_per_sample == 1
    with pytest.raises(NotImplementedError, match="not supported under torchrun"):
        hooks.agree(StopRule(kind, 600.0 if kind == "sustained" else 1, interval=10.0), warm, None)
