"""Issue 30, "quick when asked to be quick": ``--size tiny`` shows that each case works, so it gets
a small time budget and a stop rule fitted to it where no stop rule is given, and (with
``--isolation`` left out) its consecutive cases share one warm worker process per device, each
case begun as in a fresh process; a worker that dies costs only its case."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
import torch
from test_faults import FAULTY
from test_options import cli_options

from accelbench.devices import DeviceSet
from accelbench.engine.case import plan
from accelbench.engine.driver import drive
from accelbench.engine.launchers.warm import WARM_WORKER
from accelbench.engine.runner import RunWork, launch_plan
from accelbench.engine.supervise import ServedChild
from accelbench.measure.loop.stop import StopRule
from accelbench.options import RunOptions
from accelbench.options.values import (
    TINY_TARGET_CI_PCT,
    TINY_TIME_BUDGET_S,
    build_run_options,
    load_workload_files,
)
from accelbench.results import RunRecord

LEAKY = Path(__file__).resolve().parents[1] / "data" / "leaky_workloads.py"
TINY_RULE = StopRule("time", TINY_TIME_BUDGET_S, TINY_TARGET_CI_PCT)


def _pid(case: dict) -> int:
    """The warm worker a case ran in, from its result's ``isolation``."""
    isolation = case["isolation"]
    assert isolation.startswith(WARM_WORKER), isolation
    return int(isolation.rsplit(" ", 1)[1])


@pytest.mark.parametrize(("given", "rule", "warm"), [
    ({}, TINY_RULE, True),
    ({"time_budget": 3.0}, StopRule("time", 3.0), True),
    ({"target_ci": 1.0}, StopRule("time", TINY_TIME_BUDGET_S, 1.0), True),
    ({"time_budget": 2.0, "target_ci": 0.0}, StopRule("time", 2.0, 0.0), True),
    ({"steps": 4}, StopRule("steps", 4), True),
    ({"epochs": 1}, StopRule("epochs", 1), True),
    ({"isolation": "process"}, TINY_RULE, False),
    ({"isolation": "none"}, TINY_RULE, False),
    ({"repeat": 2}, TINY_RULE, False),
])
def test_the_tiny_defaults_apply_only_where_not_given(given: dict, rule: StopRule,
                                                      warm: bool) -> None:
    """Item "quick when asked": at --size tiny a left-out stop rule is the tiny budget (a given
    --time-budget, --steps, --epochs or --target-ci stands as given), and a left-out --isolation
    is a warm worker (never with an explicit --isolation, nor with --repeat)."""
    options = build_run_options("mnist", "cpu", "train", size="tiny", **given)
    assert options.stop == rule
    assert options.warm_worker is warm
    assert options.isolation == given.get("isolation", "process")
    assert launch_plan(options).warm is warm


def test_the_published_size_keeps_its_defaults_and_the_cli_fills_the_same() -> None:
    """Item "quick when asked": the published size keeps the 10 s budget and a worker per case;
    the CLI's flags left out build the same options as the API's keywords left out."""
    published = build_run_options("mnist", "cpu", "train")
    assert published.stop == StopRule() and not published.warm_worker
    assert published.isolation == "process"
    tiny = cli_options("run", ["mnist", "--size", "tiny"])
    assert tiny.stop == TINY_RULE and tiny.warm_worker and tiny.isolation == "process"
    assert tiny.stop.describe() == (f"time budget {TINY_TIME_BUDGET_S:g} s, or until the median's "
                                    f"CI is within +-{TINY_TARGET_CI_PCT:g}%")
    explicit = cli_options("run", ["mnist", "--size", "tiny", "--isolation", "process",
                                   "--time-budget", "10"])
    assert explicit.stop == StopRule("time", 10.0) and not explicit.warm_worker
    assert RunOptions.from_dict(tiny.to_dict()) == tiny


def test_consecutive_cases_share_one_worker_and_each_begins_fresh(cli, tmp_path: Path) -> None:
    """Item "quick when asked": a tiny run's cases run in one worker process (one pid), the
    later ones marked warm; a case that changes torch's switches, the default dtype, the thread
    count, the environment and every seed leaks none of it into the next case: the case after
    it finds what the worker's first case found, and draws from fresh seeds."""
    out, report = tmp_path / "r.json", tmp_path / "leaks.jsonl"
    done = cli("run", "leak-check", "leak-set", "leak-check-again", "--workload-file", str(LEAKY),
               "--device", "cpu", "--size", "tiny", "--mode", "eval", "--steps", "2", "--warmup",
               "1", "--quiet", "-o", str(out), env={"LEAK_REPORT": str(report)})
    assert done.returncode == 0, done.stderr
    cases = json.loads(out.read_text())["cases"]
    assert [case["status"] for case in cases] == ["ok", "ok", "ok"], cases
    pids = {_pid(case) for case in cases}
    assert len(pids) == 1, pids  # one worker started for every case
    assert [case["start"]["cases_before"] for case in cases] == [0, 1, 2]
    assert [case["start"]["warm"] for case in cases] == [False, True, True]

    (pid,) = pids
    readings = [json.loads(line) for line in report.read_text().splitlines()]
    # The first reading in the worker of each check: made first thing in its case.
    before, after = (next(r for r in readings if r["pid"] == pid and r["name"] == name)
                     for name in ("leak-check", "leak-check-again"))
    fresh = {"matmul": "highest", "cudnn_deterministic": False, "cudnn_benchmark": False,
             "deterministic": False, "default_dtype": "torch.float32", "environment": None}
    draws = ("torch_draw", "python_draw", "pid", "name")
    assert {name: before[name] for name in fresh} == fresh
    assert {k: v for k, v in after.items() if k not in draws} == \
        {k: v for k, v in before.items() if k not in draws}
    torch.manual_seed(1234)
    assert after["torch_draw"] != torch.rand(1).item()  # a fresh seed, not the planted one
    assert after["python_draw"] != random.Random(1234).random()


def test_a_worker_crash_costs_one_case_and_the_next_gets_a_fresh_worker() -> None:
    """Item "quick when asked": a warm worker that dies (SIGSEGV) in the middle of a plan costs
    that case only: it is "crashed" with the signal named, and the next case starts a fresh
    worker (a new pid, its first case cold)."""
    options = load_workload_files(RunOptions(
        workloads=("leak-check", "fault-segv", "leak-set"), device="cpu", modes=("eval",),
        size="tiny", stop=StopRule("steps", 2), warmup_steps=1, warm_worker=True,
        workload_files=(str(FAULTY), str(LEAKY))))
    record = drive(RunWork(options), plan(options, DeviceSet.current()),
                   RunRecord("r", "2025-01-01", "0"), launch=launch_plan(options))
    first, crashed, after = (case.to_dict() for case in record.cases)
    assert (first["status"], crashed["status"], after["status"]) == ("ok", "crashed", "ok")
    assert "SIGSEGV" in crashed["error"]
    assert _pid(crashed) == _pid(first) != _pid(after)
    assert after["start"]["cases_before"] == 0


CHILD = """
import os, sys, time
for line in sys.stdin:
    word = line.strip()
    if word == "hang":
        time.sleep(60)
    if word == "die":
        print("dying now", file=sys.stderr, flush=True)
        os._exit(3)
    print("a line of output", flush=True)
    print("@@done", flush=True)
"""


def test_a_served_child_reports_done_death_and_timeout_per_request() -> None:
    """Item "quick when asked": the supervisor's served child answers request after request in
    one process; one that dies is reported with its exit code and what it wrote during that
    request; one that overruns its timeout is killed and reported as timed out."""
    child = ServedChild([sys.executable, "-c", CHILD], "@@done")
    try:
        for _ in range(2):
            outcome, done = child.call("work", timeout=30)
            assert done and outcome.returncode == 0 and outcome.output_tail == ["a line of output"]
        outcome, done = child.call("die", timeout=30)
        assert not done and outcome.returncode == 3 and outcome.last_line() == "dying now"
        assert not child.alive
    finally:
        child.close()
    child = ServedChild([sys.executable, "-c", CHILD], "@@done")
    try:
        outcome, done = child.call("hang", timeout=0.5)
        assert not done and outcome.timed_out and not child.alive
    finally:
        child.close()
