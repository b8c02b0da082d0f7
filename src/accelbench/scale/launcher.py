"""Run a workload's distributed training at each process count through torchrun; collect the ranks.

For each ``--nproc N`` the launcher starts ``python -m torch.distributed.run --nproc-per-node N``
(``--standalone`` on one node; torchrun's own rendezvous options, passed on unchanged, across
nodes) running :func:`accelbench.scale.ddp_worker.run_rank`, waits at most ``--timeout`` seconds, then reads
the per-rank result files. torchrun ends the whole group when one rank dies; a group that is still
running at the timeout is killed (torchrun and every process under it) by the supervisor every
child process of accelbench runs under (``engine/supervise.py``). Each process count is a case of
the driver (``engine/driver.py``): saved when it ends, kept when Ctrl-C stops the rest.

The case's ``step_times`` are per step the slowest rank's time (a global step ends when its last
rank finishes). Per-process throughput = batch / median of those; global = world size x
per-process; efficiency = global / (world size / baseline world size x baseline global), the
baseline being the smallest world size measured (1 process when ``--nproc`` includes 1, which makes
it global / (N x throughput at 1 process)). Every world size, 1 included, runs under DDP/FSDP, so
the wrapper's own cost is in the baseline too.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import accelbench
from accelbench.devices import Device, DeviceSet
from accelbench.engine.case import Case, WorkerSpec, new_record, skeleton_result
from accelbench.engine.driver import Interrupted, drive
from accelbench.engine.launch import CaseWork, Progress, in_torchrun, torchrun_command
from accelbench.engine.progress import ItemProgress
from accelbench.engine.supervise import ChildOutcome, signal_name
from accelbench.errors import UsageError
from accelbench.options import RunOptions
from accelbench.options.scale import ScaleOptions
from accelbench.results import CaseResult, RunRecord, ScaleFigures, ScaleRank
from accelbench.scale.backends import (
    LAUNCH_ENV,
    backend_for,
    backend_unavailable_reason,
    check_processes_fit,
    fsdp_unavailable_reason,
)
from accelbench.scale.ddp_worker import ALL_RANKS_FILE, RankSettings
from accelbench.workloads.catalogue import get_workload_class, load_workload_file

#: Collectives in a rank give up this long after --timeout: the launcher's kill comes first; the
#: process-group timeout only backstops ranks it cannot reach (those on other nodes).
PG_TIMEOUT_MARGIN_S = 30.0


class ScaleWork(CaseWork[int]):
    """``scale``'s per-case work: one process count, launched through torchrun (the engine's
    third launcher, :func:`accelbench.engine.launch.in_torchrun`) under the shared supervisor."""

    isolation = "torchrun"

    def __init__(self, options: ScaleOptions, run_options: RunOptions, device: Device,
                 backend: str) -> None:
        self.options, self.run_options, self.device, self.backend = (options, run_options, device,
                                                                     backend)

    def label(self, nproc: int) -> str:
        return f"scale {self.options.workload}: {nproc} process(es) per node"

    def skeleton(self, nproc: int) -> CaseResult:
        return world_skeleton(self.options, self.run_options, self.device, self.backend, nproc)

    def inline(self, nproc: int, progress: Progress | None) -> CaseResult:
        raise NotImplementedError("a world size's ranks run only under torchrun")

    def ranks(self, nproc: int, progress: Progress | None) -> CaseResult:
        return run_world_size(self.options, self.run_options, self.device, self.backend, nproc)


def run_scale(options: ScaleOptions, command: list[str], progress: ItemProgress | None = None,
              on_case: Callable[[RunRecord], None] | None = None, live: bool = False) -> RunRecord:
    """One case per process count, in order, through the driver; failures become statuses, bad
    usage raises, SIGINT and SIGTERM raise ``Interrupted`` with the world sizes measured so far."""
    for path in options.workload_files:
        load_workload_file(Path(path))
    workload = get_workload_class(options.workload)(options.size)
    if "train" not in workload.modes:
        raise UsageError(f"workload {options.workload!r} has no training mode to scale")
    devices = DeviceSet.current()
    chosen = devices.select(options.device)
    if len(chosen) != 1:
        raise UsageError(f"--device {options.device!r} names {len(chosen)} devices; scale runs on "
                         "one device kind (cpu, cuda, xpu or auto)")
    device = chosen[0]
    backend = options.backend or backend_for(device)
    reason = backend_unavailable_reason(device, backend)
    if reason:
        raise UsageError(f"cannot run {device.kind} processes over torch.distributed: {reason}")
    for nproc in options.nproc:
        check_processes_fit(devices, device, nproc)
    run_options = options.run_options(device)
    record = new_record(run_options, devices, command)
    record.kind = "scale"
    record.options["scale"] = options.to_dict()

    def keep(grown: RunRecord) -> None:
        fill_efficiency(grown.cases)
        if on_case is not None:
            on_case(grown)

    try:
        drive(ScaleWork(options, run_options, device, backend), list(options.nproc), record,
              progress=progress, on_case=keep, live=live)
    except Interrupted as stop:
        fill_efficiency(stop.record.cases)
        raise
    fill_efficiency(record.cases)
    return record


def world_skeleton(options: ScaleOptions, run_options: RunOptions, device: Device, backend: str,
                   nproc: int) -> CaseResult:
    """The case of one process count before anything ran."""
    workload = get_workload_class(options.workload)(options.size)
    batch = options.batch_size or workload.batch_size("train")
    result = skeleton_result(Case(options.workload, "train", device, batch), run_options)
    world = nproc * options.rendezvous.nnodes
    result.threads = options.threads_per_process(nproc)
    # Each rank's share of an epoch, as a DistributedSampler splits it.
    result.dataset_size = -(-workload.samples_per_epoch("train") // world)
    result.steps_per_epoch = -(-result.dataset_size // batch)
    result.scale = ScaleFigures(world_size=world, nproc_per_node=nproc,
                                nnodes=options.rendezvous.nnodes, backend=backend,
                                strategy=options.strategy)
    return result


def run_world_size(options: ScaleOptions, run_options: RunOptions, device: Device, backend: str,
                   nproc: int) -> CaseResult:
    workload = get_workload_class(options.workload)(options.size)
    batch = options.batch_size or workload.batch_size("train")
    result = world_skeleton(options, run_options, device, backend, nproc)
    world = nproc * options.rendezvous.nnodes
    unavailable = workload.unavailable_reason()
    unsupported = fsdp_unavailable_reason() if options.fsdp else None
    if unavailable or unsupported:
        result.status = "unavailable" if unavailable else "unsupported"
        result.error = str(unavailable or unsupported)
        return result
    with tempfile.TemporaryDirectory(prefix="accelbench-scale-") as folder:
        out = Path(folder)
        settings = RankSettings(
            workload=options.workload, size=options.size, device=device.kind, backend=backend,
            strategy=options.strategy, batch_size=batch, warmup_steps=options.warmup_steps,
            stop_kind=options.stop.kind, stop_value=options.stop.value, seed=options.seed,
            threads=result.threads, workload_files=list(options.workload_files),
            out_dir=str(out), pg_timeout_s=options.timeout + PG_TIMEOUT_MARGIN_S,
            cudnn_benchmark=options.cudnn_benchmark)
        spec = WorkerSpec.create(RANK_WORKER, run_options, settings=settings)
        (out / "spec.json").write_text(spec.to_json())
        command = torchrun_command(nproc, options.rendezvous.torchrun_args(), out / "spec.json")
        outcome = launch(command, _environment(result.threads), options.timeout, options.echo)
        ranks = collect_ranks(out, world if options.rendezvous.nnodes == 1 else None, outcome)
    fill_case(result, ranks, outcome, options.timeout)
    return result


def _environment(threads: int) -> dict[str, str]:
    # The ranks import the same accelbench as this process, installed or not.
    source_root = str(Path(accelbench.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (source_root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **LAUNCH_ENV, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": path,
            "PYTHONUNBUFFERED": "1"}


#: torchrun, the engine's third launcher (tests replace it to see the spec without ranks).
launch = in_torchrun
#: What each rank runs.
RANK_WORKER = "accelbench.scale.ddp_worker:run_rank"


# torchrun's failure summary: "rank : 1 (local_rank: 1)" then "exitcode : -11 (pid: 42)".
_FAILURE = re.compile(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def collect_ranks(folder: Path, world: int | None, outcome: ChildOutcome) -> list[dict[str, Any]]:
    """Every rank's report; ranks that left none get one saying why. ``world`` None (several
    nodes, no gathered file) lists only the ranks whose files are here."""
    gathered = folder / ALL_RANKS_FILE
    if gathered.exists():
        reports = json.loads(gathered.read_text())
    else:
        reports = [json.loads(path.read_text()) for path in folder.glob("rank-*.json")]
    by_rank = {int(report["rank"]): report for report in reports}
    exits = {int(rank): int(code) for rank, code in _FAILURE.findall("\n".join(outcome.output_tail))}
    # SIGTERM is how torchrun stops the other ranks once one has failed: not a failure of its own.
    broken = {rank for rank, code in exits.items() if code != -signal.SIGTERM}
    broken |= {rank for rank, report in by_rank.items() if report["status"] != "ok"}
    for rank in range(world or 0):
        if rank not in by_rank:
            by_rank[rank] = _missing_rank(rank, outcome, exits.get(rank), bool(broken - {rank}))
    return [by_rank[rank] for rank in sorted(by_rank)]


def _missing_rank(rank: int, outcome: ChildOutcome, exit_code: int | None,
                  other_failed: bool) -> dict[str, Any]:
    if outcome.returncode is None:
        status, error = "timeout", "killed at the --timeout"
    elif other_failed and exit_code in (None, -signal.SIGTERM):
        status, error = "interrupted", "stopped by torchrun when another rank failed"
    elif exit_code is not None and exit_code < 0:
        status, error = "crashed", f"the process died from {signal_name(-exit_code)}"
    elif exit_code is not None:
        status, error = "crashed", f"the process exited with code {exit_code}"
    else:
        status, error = "crashed", f"left no result (torchrun exited with code {outcome.returncode})"
    return {"rank": rank, "status": status, "error": error, "step_times": [],
            "nosync_step_times": []}


#: What a rank's report keeps in the result (the rest, a traceback say, stays in the rank's file).
RANK_FIELDS = ("rank", "node_rank", "host", "device", "status", "error", "step_times",
               "nosync_step_times")


def _scale_of(result: CaseResult) -> ScaleFigures:
    if result.scale is None:
        raise ValueError("a scaling case without its ScaleFigures (set by run_world_size)")
    return result.scale


def fill_case(result: CaseResult, ranks: list[dict[str, Any]], outcome: ChildOutcome,
              timeout: float) -> None:
    """The case's status and figures from its ranks and from how torchrun ended."""
    scale = _scale_of(result)
    # A rank that left no report has no host or node rank: those stay None.
    scale.ranks = [ScaleRank.from_dict({key: value for key, value in rank.items()
                                        if key in RANK_FIELDS and value is not None},
                                       f"ranks[{index}]")
                   for index, rank in enumerate(ranks)]
    failed = [rank for rank in ranks if rank["status"] != "ok"]
    # The root cause is the first rank to fail: the others then fail on their broken
    # collectives ("connection closed by peer") or are stopped by torchrun.
    cause = min(failed, key=lambda r: (r["status"] == "interrupted", r.get("failed_at") or math.inf),
                default=None)
    if outcome.returncode is None:
        result.status = "timeout"
        result.error = (f"world size {scale.world_size} did not finish within --timeout "
                        f"{timeout:g} s; torchrun and its processes were killed")
    elif cause is not None:
        result.status, result.error = cause["status"], f"rank {cause['rank']}: {cause['error']}"
    elif not ranks or (outcome.returncode != 0 and len(ranks) < scale.world_size):
        last = next((line for line in reversed(outcome.output_tail) if line.strip()), "")
        result.status = "crashed"
        result.error = f"torchrun exited with code {outcome.returncode}" + (f": {last}" if last else "")
    elif outcome.returncode != 0:
        # Every rank finished and wrote its figures; a process then died while tearing down
        # (seen with gloo: SIGABRT in destroy_process_group). The figures stand; say so.
        scale.teardown_warning = (f"torchrun exited with code {outcome.returncode} after every "
                                  "rank had written its result")
        scale.output_tail = outcome.output_tail[-40:]
    if result.status != "ok":
        scale.output_tail = outcome.output_tail[-40:]
        return
    _fill_figures(result, ranks)


def _slowest(per_rank: list[list[float]]) -> list[float]:
    return [max(times) for times in zip(*per_rank, strict=False)]


def _fill_figures(result: CaseResult, ranks: list[dict[str, Any]]) -> None:
    scale = _scale_of(result)
    scale.world_size = int(ranks[0].get("world_size", scale.world_size))
    result.step_times = _slowest([rank["step_times"] for rank in ranks])
    # Every rank sets the same switches; rank 0 says which (fp32 = TF32 off, cudnn.benchmark).
    result.backend_flags = dict(ranks[0].get("backend_flags") or {})
    nosync = _slowest([rank["nosync_step_times"] for rank in ranks])
    result.measured_steps = int(ranks[0]["measured_steps"])
    result.warmup_steps = int(ranks[0]["warmup_steps"])
    for name in ("measured_time_s", "input_wait_s", "warmup_time_s", "time_to_first_step_s",
                 "peak_memory_bytes"):
        values = [rank[name] for rank in ranks if rank.get(name) is not None]
        if values:
            setattr(result, name, max(values))
    per_process = result.throughput()
    if per_process is None:
        return
    scale.per_process_throughput = per_process
    scale.global_throughput = per_process * scale.world_size
    if nosync:
        scale.comm_fraction = 1.0 - statistics.median(nosync) / statistics.median(result.step_times)


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
