"""One rank of a case: under torchrun (``python -m accelbench.engine.launchers.worker --rank
SPEC``), or the one rank of a world of one in this process (:func:`alone`: ``scale`` inline).

torchrun sets RANK, LOCAL_RANK, WORLD_SIZE and GROUP_RANK. A rank takes device LOCAL_RANK of its
case's device kind (made current before anything touches it), joins the process group over the
spec's backend, and runs the spec's work: the same work function, and so the same
``measure_case``, as a worker process runs, inside a :class:`RankContext`:

- the training model wrapped in DistributedDataParallel (or FSDP2's ``fully_shard`` applied to
  each child module with parameters, then to the root), the same initial weights on every rank
  (the run's seed), each rank's batches seeded ``seed + rank`` (each trains on different data,
  as under a DistributedSampler) and its share of an epoch counted as its epoch;
- the measured steps between two ``dist.barrier()``s, each step timed on its own (the device
  synchronised after every step) so the launcher can take the slowest rank step by step; a time
  budget becomes the step count every rank agrees on (the slowest rank's estimate from its
  warm-up: every rank must run the same steps, or the collectives of the extra ones would wait
  for ever);
- then the same number of steps again with gradient synchronisation off (``no_sync()`` for DDP,
  ``set_requires_gradient_sync(False)`` for FSDP), between barriers: the no-sync phase the
  communication fraction is read from (``ranks.py``).

Sensors, energy, FLOP/s and end-of-epoch work are not measured in a rank: an energy window that
needs extra steps would run a different number on each rank (a hang), and figures measured by N
ranks at once would contend with each other.

Each rank writes ``rank-<RANK>.json`` (a :class:`~accelbench.engine.launchers.ranks.RankReport`)
into the plan's ``out_dir``, also when it fails, with the error; after a successful run local
rank 0 of each node writes every rank's report, gathered over the process group.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from accelbench.engine.launchers.base import Progress, Report, print_progress, worker_function
from accelbench.engine.launchers.context import Surroundings, surrounded_by
from accelbench.engine.launchers.ranks import (
    ALL_RANKS_FILE,
    Ending,
    RankReport,
    merge_ranks,
    rank_file,
)
from accelbench.engine.spec import CaseSpec, RankPlan, load_model_files
from accelbench.engine.supervise import ChildOutcome
from accelbench.measure.trackers.region import Tracker

if TYPE_CHECKING:
    from torch import nn

    from accelbench.engine.case import Case
    from accelbench.engine.launchers.torchrun import World
    from accelbench.engine.work import CaseWork
    from accelbench.measure.loop.step_loop import StepLoop
    from accelbench.measure.loop.stop import StopRule
    from accelbench.measure.loop.timing import Timing
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


class Barriers(Tracker):
    """Every rank starts and ends a phase together, so no rank's time includes waiting for
    another to finish its set-up or its previous phase. Unlike a sensor, a barrier that fails
    fails the case (the group is broken); none is waited at when the phase raised."""

    def __enter__(self) -> Barriers:
        import torch.distributed as dist

        dist.barrier()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            import torch.distributed as dist

            dist.barrier()


def wrap(model: nn.Module, strategy: str) -> nn.Module:
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        # One FSDP unit per child with parameters, then the root: each child's parameters are
        # gathered just before it runs, instead of the whole model at once.
        for child in model.children():
            if any(True for _ in child.parameters()):
                fully_shard(child)
        return fully_shard(model)  # type: ignore[no-any-return]
    from torch.nn.parallel import DistributedDataParallel

    # device_ids=None: the module is on one device already and the step moves each batch.
    return DistributedDataParallel(model)


@contextlib.contextmanager
def gradient_sync_off(model: Any, strategy: str) -> Iterator[None]:
    if strategy == "fsdp":
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    else:
        with model.no_sync():
            yield


class RankContext(Surroundings):
    """How a rank measures its case (see the module docstring)."""

    extras = False

    def __init__(self, env: RankEnv, strategy: str) -> None:
        self.env, self.strategy = env, strategy
        #: The wrapped training model (None for an evaluation or generation case).
        self.model: Any = None
        self.nosync_step_times: list[float] = []

    def wrap_model(self, model: nn.Module, case: Case) -> nn.Module:
        if case.mode != "train":  # only training synchronises gradients
            return model
        self.model = wrap(model, self.strategy)
        return self.model  # type: ignore[no-any-return]

    def data_seed(self, seed: int) -> int:
        return seed + self.env.rank

    def epoch_share(self, samples: int) -> int:
        return -(-samples // self.env.world_size)  # as a DistributedSampler splits an epoch

    def trackers(self, own: list[Tracker]) -> list[Tracker]:
        return [Barriers()]

    def measure(self, loop: StepLoop, stop: StopRule, warmup_steps: int) -> Timing:
        from accelbench.measure.loop.step_loop import StepLoop
        from accelbench.measure.loop.stop import StopRule

        if stop.kind == "time":
            warmup_steps = max(warmup_steps, 1)  # the warm-up's pace sizes the step count
        timed = loop.run(stop, warmup_steps,
                         settle=lambda rule, warm: self._agree(rule, warm, loop.device))
        if self.model is not None:
            again = StepLoop(loop.step, loop.epoch, loop.device, trackers=[Barriers()],
                             batch_size=loop.batch_size)
            with gradient_sync_off(self.model, self.strategy):
                nosync = again.run(StopRule("steps", timed.measured_steps), 0)
            self.nosync_step_times = list(nosync.step_times)
        return timed

    def _agree(self, stop: StopRule, warm: Timing, device: Any) -> StopRule:
        """After warm-up: single steps per sample, so every rank's samples pair up step by step;
        a time budget as the step count the slowest rank's warm-up pace fills it with."""
        import torch
        import torch.distributed as dist

        from accelbench.measure.loop.stop import MIN_SAMPLES, StopRule

        warm.steps_per_sample = 1
        if stop.kind == "sustained":
            raise NotImplementedError("a sustained run is not supported under torchrun: each "
                                      "rank's intervals would end after different steps")
        if stop.kind == "epochs":
            raise NotImplementedError("--epochs is not supported under torchrun: each rank would "
                                      "work through the whole epoch, not its share of it")
        if stop.kind != "time":
            return stop
        # The warm-up steps after the first (which holds one-off set-up costs), where there are.
        first, total, steps = warm.time_to_first_step_s or 0.0, warm.warmup_time_s or 0.0, \
            warm.warmup_steps
        pace = (total - first) / (steps - 1) if steps > 1 else total
        # float32: MPS has no float64 (a step time needs no more than 7 digits).
        seconds = torch.tensor([pace], dtype=torch.float32, device=device.torch_device)
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        return StopRule("steps", max(MIN_SAMPLES, math.ceil(stop.value / max(float(seconds.item()),
                                                                                1e-6))))


def as_rank(spec: CaseSpec, env: RankEnv, report_to: Report) -> RankReport:
    """The spec's work as rank ``env.rank`` of its world, in this process: its report. A rank
    that failed leaves a larger world's group to its exit (destroying it would wait on ranks
    stuck in a collective); a world of one in this process is left at once."""
    import torch.distributed as dist

    from accelbench.devices import DeviceSet
    from accelbench.engine.case import status_of
    from accelbench.engine.launchers.backends import rank_device

    if spec.rank is None:
        raise ValueError(f"the spec of {spec.work} has no rank plan: it is not a rank's")
    report = RankReport(rank=env.rank, node_rank=env.node_rank, world_size=env.world_size,
                        host=socket.gethostname())
    try:
        if spec.case is not None:
            device = rank_device(DeviceSet.current(), spec.case.device, env.local_rank)
            spec = replace(spec, case=replace(spec.case, device=device))
            report.device = device.name
        env.join(spec.rank)
        with surrounded_by(RankContext(env, spec.rank.strategy)) as context:
            result: CaseResult = worker_function(spec.work)(spec, report_to)
        report.result, report.nosync_step_times = result, context.nosync_step_times
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


def alone(work: CaseWork[Any], item: Any, world: World, timeout: float,
          progress: Progress | None) -> CaseResult:
    """``item`` as the one rank of a world of one, in this process (a work's inline launch of a
    world size 1: ``scale`` with isolation none), made one result by the same rule."""
    spec = replace(work.spec(item), rank=RankPlan(world.backend, world.strategy, timeout))
    load_model_files(spec.model_files)
    report = as_rank(spec, RankEnv(0, in_process=True), Report(progress))
    reports = gather(report) if report.ok else [report]
    ended = ChildOutcome(0 if report.ok else 1, [])
    return merge_ranks(work.skeleton(item), reports, Ending(ended, ""), world.figures())
