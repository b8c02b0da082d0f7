"""One training or evaluation step of a case, as the runner and the parity check execute it.

The optimiser mechanics live here, once, so that every workload gets the same treatment of
precision, autocast and gradient scaling: a workload only says what its loss is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from accelbench.devices import Device
from accelbench.precision import Precision, autocast, grad_scaler, prepare_batch
from accelbench.workloads.base import Batch, Workload

Step = Callable[[Batch], torch.Tensor]


def make_train_step(workload: Workload, model: nn.Module, optimizer: torch.optim.Optimizer,
                    device: Device, precision: Precision, channels_last: bool = False) -> Step:
    scaler = grad_scaler(device, precision)
    target, non_blocking = device.torch_device, not device.is_cpu
    model.train()

    def train(batch: Batch) -> torch.Tensor:
        batch = prepare_batch(workload.to_device(batch, target, non_blocking), precision,
                              channels_last)
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, precision):
            loss = workload.training_loss(model, batch)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        return loss.detach()

    return train


def make_eval_step(workload: Workload, model: nn.Module, device: Device, precision: Precision,
                   channels_last: bool = False) -> Step:
    target, non_blocking = device.torch_device, not device.is_cpu
    model.eval()

    def evaluate(batch: Batch) -> Any:
        batch = prepare_batch(workload.to_device(batch, target, non_blocking), precision,
                              channels_last)
        with torch.no_grad(), autocast(device, precision):
            return workload.eval_step(model, batch)

    return evaluate
