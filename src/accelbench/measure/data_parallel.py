"""How a case's steps are measured: on its own, or as one rank of a data-parallel world.

``measure_case`` takes one of these, passed explicitly (made from the spec's ``RankPlan``, where
it has one), and asks it at each point where a rank measures differently:

- :class:`CaseHooks`, a case measured on its own (inline or in a worker process): every hook
  leaves the measurement as it is;
- :class:`RankHooks`, one rank of a world of ``world_size`` under torch.distributed: the training
  model wrapped in DistributedDataParallel (or FSDP2's ``fully_shard`` applied to each child
  module with parameters, then to the root), the same initial weights on every rank (the run's
  seed), each rank's batches seeded ``seed + rank`` (each trains on different data, as under a
  DistributedSampler) and its share of an epoch counted as its epoch; the measured steps between
  two ``dist.barrier()``s, each step timed on its own so the ranks' samples pair up step by step;
  a time budget becomes the step count every rank agrees on (the slowest rank's estimate from its
  warm-up: every rank must run the same steps, or the collectives of the extra ones would wait for
  ever); then the same number of steps again with gradient synchronisation off (``no_sync()`` for
  DDP, ``set_requires_gradient_sync(False)`` for FSDP), between barriers: the no-sync phase the
  communication fraction is read from (engine/launchers/ranks.py).

Sensors, energy, FLOP/s and end-of-epoch work are not measured in a rank (``extras``): an energy
window that needs extra steps would run a different number on each rank (a hang), and figures
measured by N ranks at once would contend with each other.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from accelbench.measure.trackers.region import Tracker

if TYPE_CHECKING:
    from torch import nn

    from accelbench.measure.loop.step_loop import StepLoop
    from accelbench.measure.loop.stop import StopRule
    from accelbench.measure.loop.timing import Timing

class CaseHooks:
    """A case measured on its own: every hook leaves the measurement as it is."""

    #: Figures beyond the timed steps that a case measures once it ran (FLOP/s against the
    #: measured peak, the workload's end-of-epoch work, sensors, energy, the profile).
    extras: bool = True

    def __init__(self) -> None:
        #: The no-sync phase's step times (a rank's training case only).
        self.nosync_step_times: list[float] = []

    def wrap_model(self, model: nn.Module, train: bool) -> nn.Module:
        """The model the steps run (after it is on the device, before compiling)."""
        return model

    def data_seed(self, seed: int) -> int:
        """The seed of this process's batches."""
        return seed

    def epoch_share(self, samples: int) -> int:
        """The samples of an epoch this process works through."""
        return samples

    def trackers(self, own: list[Tracker]) -> list[Tracker]:
        """The trackers around the measured steps, given the case's own (sensors, energy)."""
        return own

    def measure(self, loop: StepLoop, stop: StopRule, warmup_steps: int) -> Timing:
        """Warm up and measure with ``loop``."""
        return loop.run(stop, warmup_steps)


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
    """``model`` wrapped for data-parallel training under ``strategy`` (ddp or fsdp)."""
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        # One FSDP unit per child with parameters, then the root: each child's parameters are
        # gathered just before it runs, instead of the whole model at once.
        for child in model.children():
            if any(True for _ in child.parameters()):
                fully_shard(child)
        fully_shard(model)  # in place: the module's class becomes an FSDP one
        return model
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


class RankHooks(CaseHooks):
    """How rank ``rank`` of a world of ``world_size`` measures its case (the module docstring)."""

    extras = False

    def __init__(self, rank: int, world_size: int, strategy: str) -> None:
        super().__init__()
        self.rank, self.world_size, self.strategy = rank, world_size, strategy
        #: The wrapped training model (None for an evaluation or generation case).
        self.model: Any = None

    def wrap_model(self, model: nn.Module, train: bool) -> nn.Module:
        if not train:  # only training synchronises gradients
            return model
        self.model = wrap(model, self.strategy)
        return self.model

    def data_seed(self, seed: int) -> int:
        return seed + self.rank

    def epoch_share(self, samples: int) -> int:
        return -(-samples // self.world_size)  # as a DistributedSampler splits an epoch

    def trackers(self, own: list[Tracker]) -> list[Tracker]:
        return [Barriers()]

    def measure(self, loop: StepLoop, stop: StopRule, warmup_steps: int) -> Timing:
        from accelbench.measure.loop.step_loop import StepLoop
        from accelbench.measure.loop.stop import StopRule

        if stop.kind == "time":
            warmup_steps = max(warmup_steps, 1)  # the warm-up's pace sizes the step count
        timed = loop.run(stop, warmup_steps,
                         settle=lambda rule, warm: self.agree(rule, warm, loop.device))
        if self.model is not None:
            again = StepLoop(loop.step, loop.epoch, loop.device, trackers=[Barriers()],
                             batch_size=loop.batch_size)
            with gradient_sync_off(self.model, self.strategy):
                nosync = again.run(StopRule("steps", timed.measured_steps), 0)
            self.nosync_step_times = list(nosync.step_times)
        return timed

    def agree(self, stop: StopRule, warm: Timing, device: Any) -> StopRule:
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
