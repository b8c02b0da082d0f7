"""One training or evaluation step of a case, as the runner and the parity check execute it.

The optimiser mechanics live here, once, so that every workload gets the same treatment of
precision, autocast and gradient scaling: a workload only says what its loss is.

A compiled model and an epoch's partial last batch
--------------------------------------------------
``torch.compile`` specialises a graph to the shapes it first sees. When a frame meets a second
size in a dimension, dynamo's automatic dynamic shapes recompiles it with that dimension symbolic,
and since the newest graph is tried first, every later full batch runs the symbolic graph. An epoch
run (``--epochs``) meets its partial last batch in warm-up, so its full batches would run a
different graph from a ``--steps`` run's. Given the full batch size (``static_batch``):

* a step on a smaller batch runs with automatic dynamic shapes off: the partial batch gets graphs
  of its own, static, in every frame it touches (also those after a graph break, which marking its
  inputs would not reach), and the full batch's static graphs stay the ones that run;
* the batch dimension of every prepared input is marked static (``torch._dynamo.mark_static``):
  dynamo remembers the partial batch's size per function, process-wide, so without the mark the
  next compile of the same model code at the full size (another case in the same process, under
  ``--isolation none``) would still make that dimension symbolic.

Only compiled training and evaluation steps do this, and only for the batch dimension: shapes
that legitimately grow elsewhere (a generation's key/value cache) keep torch's default.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from accelbench.devices import Device
from accelbench.devices.numerics import Precision, autocast, grad_scaler, prepare_batch
from accelbench.measure.loop.step_loop import batch_length
from accelbench.workloads.base import Batch, Workload

Step = Callable[[Batch], torch.Tensor]


def shape_policy(batch: Batch, static_batch: int | None) -> contextlib.AbstractContextManager[Any]:
    """The compile setting a step on ``batch`` runs under (see the module docstring): automatic
    dynamic shapes off for a batch smaller than ``static_batch``; torch's default otherwise."""
    length = batch_length(batch)
    if static_batch is None or length is None or length >= static_batch:
        return contextlib.nullcontext()
    import torch._dynamo  # only for a compiled case's partial batch: the import is not free

    return torch._dynamo.config.patch(automatic_dynamic_shapes=False, assume_static_by_default=True)


def mark_batch_static(batch: Batch, static_batch: int | None) -> None:
    """Mark the batch dimension of a compiled case's prepared inputs static (module docstring)."""
    if static_batch is None:
        return
    import torch._dynamo

    for tensor in batch:
        if isinstance(tensor, torch.Tensor) and tensor.dim():
            torch._dynamo.mark_static(tensor, 0)


class TrainStep:
    """zero_grad, loss under autocast, backward (scaled for fp16 autocast) and the optimiser step.

    With ``track_skipped``, ``skipped`` lists the 1-based steps whose update the gradient scaler
    skipped (inf/NaN gradients at the current scale): a parity check replays them as skipped on
    the reference. Tracking reads the scale on the host (``get_scale()`` is a host sync) twice a
    step, which stops the host queueing ahead of the device, so timed runs leave it off: their
    steps make no host sync beyond the one inside ``GradScaler.step`` that PyTorch's own AMP
    recipe makes (its inf check), which a plain training loop pays too.

    ``static_batch``: a compiled model's full batch size (see the module docstring).
    """

    def __init__(self, workload: Workload, model: nn.Module, optimizer: torch.optim.Optimizer,
                 device: Device, precision: Precision, channels_last: bool = False,
                 track_skipped: bool = False, static_batch: int | None = None) -> None:
        self.workload, self.model, self.optimizer = workload, model, optimizer
        self.device, self.precision, self.channels_last = device, precision, channels_last
        self.scaler = grad_scaler(device, precision)
        self.track_skipped = track_skipped
        self.static_batch = static_batch
        self.steps = 0
        self.skipped: list[int] = []
        model.train()

    def __call__(self, batch: Batch, update: bool = True) -> torch.Tensor:
        with shape_policy(batch, self.static_batch):
            return self._step(batch, update)

    def _step(self, batch: Batch, update: bool) -> torch.Tensor:
        self.steps += 1
        batch = prepare_batch(self.workload.to_device(batch, self.device.torch_device,
                                                      not self.device.is_cpu),
                              self.precision, self.channels_last)
        mark_batch_static(batch, self.static_batch)
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.device, self.precision):
            loss = self.workload.training_loss(self.model, batch)
        if not update:
            return loss.detach()
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
        else:
            scale = self.scaler.get_scale() if self.track_skipped else 0.0
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            if self.track_skipped and self.scaler.get_scale() < scale:
                self.skipped.append(self.steps)
        return loss.detach()


def make_train_step(workload: Workload, model: nn.Module, optimizer: torch.optim.Optimizer,
                    device: Device, precision: Precision, channels_last: bool = False,
                    track_skipped: bool = False, static_batch: int | None = None) -> TrainStep:
    return TrainStep(workload, model, optimizer, device, precision, channels_last, track_skipped,
                     static_batch)


def make_eval_step(workload: Workload, model: nn.Module, device: Device, precision: Precision,
                   channels_last: bool = False, static_batch: int | None = None) -> Step:
    """``static_batch``: a compiled model's full batch size (see the module docstring)."""
    target, non_blocking = device.torch_device, not device.is_cpu
    model.eval()

    def evaluate(batch: Batch) -> Any:
        with shape_policy(batch, static_batch):
            prepared = prepare_batch(workload.to_device(batch, target, non_blocking), precision,
                                     channels_last)
            mark_batch_static(prepared, static_batch)
            with torch.no_grad(), autocast(device, precision):
                return workload.eval_step(model, prepared)

    return evaluate
