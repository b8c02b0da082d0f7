"""The Python API: run workloads from a notebook or script and get result objects back.

    import accelbench
    record = accelbench.run(["mnist"], device="cpu", steps=20)
    for case in record.cases:
        print(case.workload, case.mode, case.throughput(), case.epoch_time())
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from accelbench.devices import DeviceSet
from accelbench.errors import UsageError
from accelbench.options import DEFAULT_TIME_BUDGET_S, DEFAULT_WARMUP_STEPS, RunOptions, StopRule
from accelbench.results import RunRecord
from accelbench.runner import CaseProgress, plan, run_plan
from accelbench.workloads import match_workloads


def list_workloads(*patterns: str) -> list[str]:
    """Registered workload names, optionally filtered by wildcards such as ``resnet*``."""
    return match_workloads(patterns or ("*",))


def stop_rule(steps: int | None = None, time_budget: float | None = None,
              epochs: int | None = None) -> StopRule:
    given = [(k, v) for k, v in (("steps", steps), ("time", time_budget), ("epochs", epochs))
             if v is not None]
    if len(given) > 1:
        raise UsageError("give at most one of steps, time_budget and epochs")
    return StopRule(*given[0]) if given else StopRule("time", DEFAULT_TIME_BUDGET_S)


def run(
    workloads: Sequence[str] = ("mnist",),
    device: str = "auto",
    modes: Sequence[str] = ("train", "eval"),
    *,
    steps: int | None = None,
    time_budget: float | None = None,
    epochs: int | None = None,
    warmup: int = DEFAULT_WARMUP_STEPS,
    batch_size: int | None = None,
    threads: int | None = None,
    data: str = "synthetic",
    data_dir: str | Path | None = None,
    size: str = "published",
    workers: int = 0,
    workload_file: str | Path | None = None,
    isolation: str = "process",
    save: bool = True,
    progress: CaseProgress | None = None,
) -> RunRecord:
    """Run workloads on devices and return the RunRecord (also saved like a CLI run)."""
    workload_files: tuple[str, ...] = ()
    if workload_file is not None:
        from accelbench.userfile import load_workload_file

        load_workload_file(Path(workload_file))
        workload_files = (str(Path(workload_file).resolve()),)
    options = RunOptions(
        workloads=tuple(match_workloads(list(workloads))), device=device, modes=tuple(modes),
        stop=stop_rule(steps, time_budget, epochs), warmup_steps=warmup, batch_size=batch_size,
        threads=threads, data=data, data_dir=Path(data_dir) if data_dir else None, size=size,
        workers=workers, workload_files=workload_files, isolation=isolation,
    )
    devices = DeviceSet.current()
    record = run_plan(options, devices, plan(options, devices), ["python", *sys.argv[:1]],
                      progress=progress)
    if save:
        from accelbench.store.keep import store_everywhere

        store_everywhere(record)
    return record
