"""One rank of a case: under torchrun (``python -m accelbench.engine.launchers.worker --rank
SPEC``), or the one rank of a world of one in this process (:func:`alone`: ``scale`` inline).

torchrun sets RANK, LOCAL_RANK, WORLD_SIZE and GROUP_RANK. A rank takes device LOCAL_RANK of its
case's device kind (made current before anything touches it), joins the process group over the
spec's backend, writes its place in the world into the spec's :class:`RankPlan`, and runs the
spec's work: the same work function, and so the same ``measure_case``, as a worker process runs.
The work passes the plan on to ``measure_case``, which measures as a rank
(measure/data_parallel.py: DDP or FSDP2, data seeded per rank, barriers, the agreed step count,
the no-sync phase) and returns the rank's no-sync step times in its result.

Each rank writes ``rank-<RANK>.json`` (a :class:`~accelbench.engine.launchers.ranks.RankReport`)
into the plan's ``out_dir``, also when it fails, with the error; after a successful run local
rank 0 of each node writes every rank's report, gathered over the process group.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.engine.launchers.base import Progress, Report, Work, print_progress, worker_function
from accelbench.engine.launchers.ranks import (
    ALL_RANKS_FILE,
    Ending,
    RankReport,
    merge_ranks,
    rank_file,
)
from accelbench.engine.spec import CaseSpec, RankPlan, load_model_files
from accelbench.engine.supervise import ChildOutcome

if TYPE_CHECKING:
    from accelbench.engine.launchers.torchrun import World
    from accelbench.results import CaseResult


@dataclass(frozen=True)
class RankEnv:
    """Who this rank is in its world."""

    rank: int
    local_rank: int = 0
    world_size: int = 1
    node_rank: int = 0
    #: A world of one inside this process, not started by torchrun: its store is in memory.
    in_process: bool = False

    @classmethod
    def from_torchrun(cls) -> RankEnv:
        return cls(int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]),
                   int(os.environ["WORLD_SIZE"]), int(os.environ.get("GROUP_RANK", 0)))

    def join(self, plan: RankPlan) -> None:
        import torch.distributed as dist

        timeout = timedelta(seconds=plan.pg_timeout_s)
        if self.in_process:
            dist.init_process_group(plan.backend, store=dist.HashStore(), rank=0, world_size=1,
                                    timeout=timeout)
        else:
            dist.init_process_group(plan.backend, timeout=timeout)


def as_rank(spec: CaseSpec, env: RankEnv, report_to: Report) -> RankReport:
    """The spec's work as rank ``env.rank`` of its world, in this process: its report. A rank
    that failed leaves a larger world's group to its exit (destroying it would wait on ranks
    stuck in a collective); a world of one in this process is left at once."""
    import torch.distributed as dist

    from accelbench.devices import DeviceSet
    from accelbench.engine.case import status_of
    from accelbench.engine.launchers.backends import rank_device

    plan = spec.rank
    if plan is None:
        raise ValueError(f"the spec of {spec.work} has no rank plan: it is not a rank's")
    report = RankReport(rank=env.rank, node_rank=env.node_rank, world_size=env.world_size,
                        host=socket.gethostname())
    try:
        if spec.case is not None:
            device = rank_device(DeviceSet.current(), spec.case.device, env.local_rank)
            spec = replace(spec, case=replace(spec.case, device=device))
            report.device = device.name
        env.join(plan)
        spec = replace(spec, rank=replace(plan, rank=env.rank, world_size=env.world_size))
        result: CaseResult = worker_function(spec.work)(spec, report_to)
        report.result = result
        mine = result.scale.ranks if result.scale is not None else []
        report.nosync_step_times = list(mine[0].nosync_step_times) if mine else []
        report.status, report.error, report.traceback = result.status, result.error, result.traceback
    except Exception as error:
        report.status = status_of(error)
        report.error = f"{type(error).__name__}: {error}".strip()
        report.traceback = traceback.format_exc(limit=8)
    if not report.ok:
        report.failed_at = time.time()  # the launcher names the first rank to fail
        if env.in_process and dist.is_initialized():
            dist.destroy_process_group()
    return report


def gather(report: RankReport) -> list[RankReport]:
    """Every rank's report, gathered over the group (each rank's ended well), then the group
    left."""
    import torch.distributed as dist

    data: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(data, report.to_dict())
    dist.destroy_process_group()
    return [RankReport.from_dict(item) for item in data]


def run_rank(spec_path: Path) -> int:
    """A rank under torchrun: its report to ``rank-<RANK>.json``; the exit code is torchrun's to
    see (1 stops the other ranks)."""
    from accelbench.files import write_atomic

    env = RankEnv.from_torchrun()
    spec = CaseSpec.from_json(spec_path.read_text())
    load_model_files(spec.model_files)
    out = Path(spec.rank.out_dir if spec.rank is not None else ".")
    report = as_rank(spec, env, Report(print_progress if env.rank == 0 else None))
    write_atomic(out / rank_file(env.rank), json.dumps(report.to_dict()))
    if not report.ok:
        sys.stderr.write(report.traceback)  # torchrun passes it on to the launcher's log
        return 1
    everyone = gather(report)
    if env.local_rank == 0:
        write_atomic(out / ALL_RANKS_FILE, json.dumps([r.to_dict() for r in everyone]))
    return 0


def alone(work: Work, item: Any, world: World, timeout: float,
          progress: Progress | None) -> CaseResult:
    """``item`` as the one rank of a world of one, in this process (a work's inline launch of a
    world size 1: ``scale`` with isolation none), made one result by the same rule."""
    spec = replace(work.spec(item), rank=RankPlan(world.backend, world.strategy, timeout))
    load_model_files(spec.model_files)
    report = as_rank(spec, RankEnv(0, in_process=True), Report(progress))
    reports = gather(report) if report.ok else [report]
    ended = ChildOutcome(0 if report.ok else 1, [])
    return merge_ranks(work.skeleton(item), reports, Ending(ended, ""), world.figures())
