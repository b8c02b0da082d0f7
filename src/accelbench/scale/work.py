"""``scale``'s work: a workload's training at each process count, one case of the driver each.

A process count N is a world of N processes per node (x nodes) (:meth:`ScaleWork.world`), launched
by the launcher ``engine/launchers/choose.py`` picks: torchrun (``engine/launchers/torchrun.py``);
each rank runs ``run``'s own worker function, so the same ``measure_case`` as every other case,
measured as a rank (``measure/data_parallel.py``: DDP or FSDP2, data seeded per rank, barriers,
the agreed step count, the no-sync phase), and the ranks' results are merged by the engine's one
rule (``engine/launchers/ranks.py``). With isolation "none" the inline launcher runs a world of
one in this process instead, by the same code (``engine/launchers/rank.py``'s ``alone``). Each
world size is saved when it ends and kept when Ctrl-C stops the rest (``engine/driver.py``).

Scale's own part is the plan of world sizes and the efficiency across them: efficiency = global /
(world size / baseline world size x baseline global), the baseline being the smallest world size
measured (1 process when ``--nproc`` includes 1, which makes it global / (N x throughput at 1
process)). Every world size, 1 included, runs under DDP/FSDP, so the wrapper's own cost is in the
baseline too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from accelbench.devices import Device, DeviceSet
from accelbench.engine.case import Case, new_record, skeleton_result
from accelbench.engine.driver import Interrupted, drive
from accelbench.engine.launchers.backends import check_world, fsdp_unavailable_reason
from accelbench.engine.launchers.base import Launcher, Progress
from accelbench.engine.launchers.choose import LaunchPlan
from accelbench.engine.launchers.torchrun import World
from accelbench.engine.progress import ItemProgress
from accelbench.engine.runner import RunWork
from accelbench.engine.spec import CaseSpec, model_files_for
from accelbench.engine.work import CaseWork
from accelbench.errors import UsageError
from accelbench.options import RunOptions
from accelbench.options.recorded import RecordedScale
from accelbench.options.scale import ScaleOptions
from accelbench.results import CaseResult, RunRecord
from accelbench.workloads.catalogue import get_workload_class, load_workload_file


class ScaleWork(CaseWork[int]):
    """``scale``'s per-case work: one process count. A rank's work is ``run``'s."""

    worker = RunWork.worker

    def __init__(self, options: ScaleOptions, run_options: RunOptions, device: Device,
                 backend: str) -> None:
        self.options, self.run_options, self.device, self.backend = (options, run_options, device,
                                                                     backend)
        workload = get_workload_class(options.workload)(run_options.size)
        self.case = Case(workload=options.workload, mode="train", device=device,
                         batch_size=run_options.batch_size or workload.batch_size("train"))
        self.samples_per_epoch = workload.samples_per_epoch("train")
        self.unavailable = workload.unavailable_reason()

    def world(self, nproc: int) -> World:
        rendezvous = self.options.rendezvous
        return World(nproc, self.backend, self.options.strategy, rendezvous.nnodes,
                     tuple(rendezvous.torchrun_args()), self.run_options.threads)

    def label(self, nproc: int) -> str:
        return f"scale {self.options.workload}: {nproc} process(es) per node"

    def skeleton(self, nproc: int) -> CaseResult:
        """The case of one process count before anything ran."""
        world = self.world(nproc)
        result = skeleton_result(self.case, self.run_options)
        result.threads = world.threads_per_process
        # Each rank's share of an epoch, as a DistributedSampler splits it.
        result.dataset_size = -(-self.samples_per_epoch // world.size)
        result.steps_per_epoch = -(-result.dataset_size // self.case.batch_size)
        result.scale = world.figures()
        return result

    def spec(self, nproc: int) -> CaseSpec:
        return CaseSpec(self.worker, self.run_options, self.case,
                        model_files=model_files_for(self.case.workload))

    def inline(self, nproc: int, progress: Progress | None) -> CaseResult:
        from accelbench.engine.launchers.rank import alone

        return alone(self, nproc, self.world(nproc), self.options.timeout, progress)

    def launch(self, launcher: Launcher, nproc: int, progress: Progress | None) -> CaseResult:
        """A world of ``nproc`` processes per node, unless the workload or FSDP cannot run here."""
        unsupported = fsdp_unavailable_reason() if self.options.fsdp else None
        if self.unavailable or unsupported:
            result = self.skeleton(nproc)
            result.status = "unavailable" if self.unavailable else "unsupported"
            result.error = str(self.unavailable or unsupported)
            return result
        return super().launch(launcher, nproc, progress)


def launch_plan(options: ScaleOptions) -> LaunchPlan:
    """Each world size under torchrun, or, with isolation "none", a world of one in this process
    (the inline launcher: :meth:`ScaleWork.inline`)."""
    isolation = "none" if options.run.isolation == "none" else "torchrun"
    return LaunchPlan(isolation, options.timeout, options.echo, timeout_flag="--timeout")


def run_scale(options: ScaleOptions, command: list[str], progress: ItemProgress | None = None,
              on_case: Callable[[RunRecord], None] | None = None, live: bool = False) -> RunRecord:
    """One case per process count, in order, through the driver; failures become statuses, bad
    usage raises, SIGINT and SIGTERM raise ``Interrupted`` with the world sizes measured so far."""
    for path in options.run.workload_files:
        load_workload_file(Path(path))
    workload = get_workload_class(options.workload)(options.run.size)
    if "train" not in workload.modes:
        raise UsageError(f"workload {options.workload!r} has no training mode to scale")
    devices = DeviceSet.current()
    chosen = devices.select(options.run.device)
    if len(chosen) != 1:
        raise UsageError(f"--device {options.run.device!r} names {len(chosen)} devices; scale runs "
                         "on one device kind (cpu, cuda, xpu or auto)")
    device = chosen[0]
    backend = check_world(devices, device, max(options.nproc), options.backend)
    run_options = options.run_options(device)
    record = new_record(run_options, devices, command)
    record.kind = "scale"
    record.options = RecordedScale(run_options, scale=options)

    def keep(grown: RunRecord) -> None:
        fill_efficiency(grown.cases)
        if on_case is not None:
            on_case(grown)

    try:
        drive(ScaleWork(options, run_options, device, backend), list(options.nproc), record,
              launch=launch_plan(options), progress=progress, on_case=keep, live=live)
    except Interrupted as stop:
        fill_efficiency(stop.record.cases)
        raise
    fill_efficiency(record.cases)
    return record


def fill_efficiency(cases: list[CaseResult]) -> None:
    """Scaling efficiency of every measured case against the smallest measured world size."""
    measured = [(case.scale, case.scale.global_throughput) for case in cases
                if case.scale is not None and case.scale.global_throughput]
    if not measured:
        return
    base, base_rate = min(measured, key=lambda pair: pair[0].world_size)
    for scale, rate in measured:
        ideal = base_rate * scale.world_size / base.world_size
        efficiency = rate / ideal if ideal > 0 else None
        scale.efficiency = efficiency if efficiency is not None and math.isfinite(efficiency) else None
        scale.efficiency_baseline_world_size = base.world_size
