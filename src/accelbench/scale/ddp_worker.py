"""One rank of a scaling case: ``torchrun ... -m accelbench.engine.worker --rank SPEC.json``, which
calls :func:`run_rank` (the spec's ``work``) with the spec's settings.

torchrun sets RANK, LOCAL_RANK, WORLD_SIZE and GROUP_RANK. Each rank writes
``rank-<RANK>.json`` into the spec's ``out_dir`` (also when it fails, with the error), and after
a successful run local rank 0 of each node writes ``all-ranks.json`` with every rank's report,
gathered over the process group, so each node's launcher sees the ranks of the other nodes too.

What a rank runs, under the fp32 precision settings of ``run`` (TF32 off everywhere, so an
Ampere GPU's convolutions are fp32 as labelled) with ``cudnn.benchmark`` as the spec says (its
tries happen in the warm-up), both recorded in the report's ``backend_flags``: the workload's
model wrapped in DistributedDataParallel (or FSDP2's
``fully_shard`` applied to each child module with parameters and then to the root), the workload's
optimiser, and the workload's synthetic batches with seed ``seed + rank`` (each rank trains on
different data, as under a DistributedSampler). Warm-up, a ``dist.barrier()``, the timed steps
(the device synchronised after every step), a barrier; then the same number of steps again
with gradient synchronisation switched off (``no_sync()`` for DDP,
``set_requires_gradient_sync(False)`` for FSDP), between barriers.

The communication fraction the launcher derives, ``1 - median(no-sync step) / median(step)``,
is the share of the step that disappears without the gradient all-reduce (reduce-scatter for
FSDP): the communication the backward pass could not hide, plus the time ranks wait for the
slowest one at each all-reduce. It is not the total time spent in collectives (overlapped
communication costs nothing here), and for FSDP it leaves out the parameter all-gathers, which run
with or without gradient synchronisation. Noise can make it slightly negative at one process.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.engine.case import WorkerSpec

ALL_RANKS_FILE = "all-ranks.json"


@dataclass(frozen=True)
class RankSettings:
    """What every rank of one world size runs (the launcher writes it into the worker spec)."""

    workload: str
    size: str
    #: The device kind; local rank N takes device N of it.
    device: str
    backend: str
    #: "ddp" or "fsdp".
    strategy: str
    #: Per process.
    batch_size: int
    warmup_steps: int
    #: The stop rule's kind ("steps" or "time") and value (steps, or seconds of timed steps).
    stop_kind: str
    stop_value: float
    seed: int
    threads: int
    workload_files: list[str]
    #: Where each rank writes its report.
    out_dir: str
    pg_timeout_s: float
    cudnn_benchmark: bool


def rank_file(rank: int) -> str:
    return f"rank-{rank}.json"


def run_rank(worker_spec: WorkerSpec) -> int:
    """One rank (``python -m accelbench.engine.worker --rank SPEC`` under torchrun): its report
    goes to ``rank-<RANK>.json`` in the spec's ``out_dir``; the exit code is torchrun's to see."""
    spec = worker_spec.settings_as(RankSettings)
    out = Path(spec.out_dir)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    report: dict[str, Any] = {
        "rank": rank, "local_rank": local_rank, "node_rank": int(os.environ.get("GROUP_RANK", 0)),
        "world_size": int(os.environ["WORLD_SIZE"]), "host": socket.gethostname(),
        "status": "ok", "error": "", "step_times": [], "nosync_step_times": [],
    }
    from accelbench.engine.case import status_of
    from accelbench.files import write_atomic

    try:
        report.update(_run(spec, rank, local_rank))
    except Exception as error:
        report["failed_at"] = time.time()  # the launcher names the first rank to fail
        report["status"] = status_of(error)
        report["error"] = f"{type(error).__name__}: {error}".strip()
        report["traceback"] = traceback.format_exc(limit=8)
        write_atomic(out / rank_file(rank), json.dumps(report))
        traceback.print_exc()  # torchrun passes it on to the launcher's log
        return 1
    write_atomic(out / rank_file(rank), json.dumps(report))
    _gather(report, local_rank, out)
    return 0


def _gather(report: dict[str, Any], local_rank: int, out: Path) -> None:
    import torch.distributed as dist

    from accelbench.files import write_atomic

    reports: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(reports, report)
    if local_rank == 0:
        write_atomic(out / ALL_RANKS_FILE, json.dumps(reports))
    dist.destroy_process_group()


def _run(spec: RankSettings, rank: int, local_rank: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from accelbench.data.options import DataOptions
    from accelbench.devices import DeviceSet
    from accelbench.devices.numerics import backend_flags, get_precision, precision_settings
    from accelbench.engine.steps import make_train_step
    from accelbench.measure.stop import StopRule
    from accelbench.measure.trackers import MemoryTracker
    from accelbench.scale.backends import rank_device
    from accelbench.workloads.catalogue import get_workload_class, load_workload_file

    for path in spec.workload_files:
        load_workload_file(Path(path))
    torch.set_num_threads(spec.threads)
    device = rank_device(DeviceSet.current(), spec.device, local_rank)
    dist.init_process_group(spec.backend, timeout=timedelta(seconds=spec.pg_timeout_s))
    workload = get_workload_class(spec.workload)(spec.size)
    torch.manual_seed(spec.seed)  # the same initial weights on every rank
    memory = MemoryTracker(device)
    fp32 = get_precision("fp32")
    # this rank's whole work: model, optimiser state, warm-up and the steps
    with precision_settings(fp32, device, cudnn_benchmark=spec.cudnn_benchmark), memory:
        flags = backend_flags(device)
        model = _wrap(workload.build_model().to(device.torch_device), spec.strategy)
        optimizer = workload.make_optimizer(model)
        batch = spec.batch_size
        batches = workload.make_batches("train", batch, DataOptions(seed=spec.seed + rank))
        step = make_train_step(workload, model, optimizer, device, fp32)

        def measure(steps: int) -> Any:
            from accelbench.measure.loop import StepLoop

            return StepLoop(step, batches, device).run(StopRule("steps", steps), 0)

        warmup = spec.warmup_steps
        if spec.stop_kind == "time":
            warmup = max(warmup, 1)  # the warm-up steps estimate how many steps fill the budget
        warm = measure(warmup) if warmup else None
        steps = int(spec.stop_value) if spec.stop_kind == "steps" else _steps_for_budget(
            spec.stop_value, warm, device)
        timed = _between_barriers(lambda: measure(steps))
        with _gradient_sync_off(model, spec.strategy):
            nosync = _between_barriers(lambda: measure(steps))
    return {
        "device": device.name, "threads": torch.get_num_threads(),
        "step_times": timed.step_times, "nosync_step_times": nosync.step_times,
        "measured_steps": timed.measured_steps, "measured_time_s": timed.measured_time_s,
        "input_wait_s": timed.input_wait_s, "warmup_steps": warmup,
        "warmup_time_s": warm.measured_time_s if warm else None,
        "time_to_first_step_s": warm.step_times[0] if warm else None,
        "peak_memory_bytes": memory.result.bytes, "backend_flags": flags,
    }


def _wrap(model: Any, strategy: str) -> Any:
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        # One FSDP unit per child with parameters, then the root: each child's parameters are
        # gathered just before it runs, instead of the whole model at once.
        for child in model.children():
            if any(True for _ in child.parameters()):
                fully_shard(child)
        return fully_shard(model)
    from torch.nn.parallel import DistributedDataParallel

    # device_ids=None: the module is on one device already and TrainStep moves each batch.
    return DistributedDataParallel(model)


@contextlib.contextmanager
def _gradient_sync_off(model: Any, strategy: str) -> Iterator[None]:
    if strategy == "fsdp":
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    else:
        with model.no_sync():
            yield


def _between_barriers(run: Any) -> Any:
    """Every rank starts and ends the timed phase together, so no rank's time includes waiting
    for another to finish its set-up or its previous phase."""
    import torch.distributed as dist

    dist.barrier()
    result = run()
    dist.barrier()
    return result


def _steps_for_budget(budget_s: float, warm: Any, device: Any) -> int:
    """Steps that fill the time budget at the warm-up's pace, agreed by all ranks (the slowest
    rank's estimate): every rank must run the same number of steps, or the collectives of the
    extra steps would wait forever."""
    import torch
    import torch.distributed as dist

    from accelbench.measure.stop import MIN_SAMPLES

    # The last warm-up step: the first ones include one-off set-up costs.
    # float32: MPS has no float64 (a step time needs no more than 7 digits).
    seconds = torch.tensor([warm.step_times[-1]], dtype=torch.float32, device=device.torch_device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    return max(MIN_SAMPLES, math.ceil(budget_s / max(float(seconds.item()), 1e-6)))

