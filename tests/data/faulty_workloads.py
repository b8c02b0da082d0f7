"""Workloads that fail on purpose, loaded with --workload-file by the fault tests; and two with a
planted speed for the sustained tests:

``throttle-half``: each step takes 10 ms, and 20 ms once ``THROTTLE_AFTER_S`` seconds (default
1.5) have passed since its first step: a device that loses half its speed at a known time.
``steady-sleep``: 10 ms a step throughout. A step sleeps all but its last 6 ms (a sleep overshoots
by a varying amount on a VM) and waits out the exact rest, so a busy machine moves it little.
"""

from __future__ import annotations

import os
import signal
import time

import torch
import torch.nn.functional as F
from torch import nn

import accelbench
from accelbench.data.synthetic import synthetic_epoch


def _batch(generator: torch.Generator, n: int):
    return torch.randn(n, 8, generator=generator), torch.randint(0, 2, (n,), generator=generator)


class _Base(accelbench.Workload):
    description = "fails on purpose"
    default_batch_size = tiny_batch_size = {"train": 16, "eval": 16}
    dataset_size = tiny_dataset_size = {"train": 64, "eval": 64}

    def build_model(self) -> nn.Module:
        return nn.Linear(8, 2)

    def make_optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.1)

    def make_batches(self, mode, batch_size, options):
        return synthetic_epoch(_batch, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model, batch):
        x, y = batch
        self.fault(len(x))
        return F.cross_entropy(model(x), y)

    def eval_step(self, model, batch):
        self.fault(len(batch[0]))
        return model(batch[0])

    def fault(self, batch_size: int) -> None:
        pass


@accelbench.register
class Segfault(_Base):
    name = "fault-segv"

    def fault(self, batch_size: int) -> None:
        os.kill(os.getpid(), signal.SIGSEGV)


@accelbench.register
class Hang(_Base):
    name = "fault-hang"

    def fault(self, batch_size: int) -> None:
        time.sleep(3600)


@accelbench.register
class OutOfMemory(_Base):
    name = "fault-oom"

    def fault(self, batch_size: int) -> None:
        if batch_size > 4:
            raise torch.OutOfMemoryError(f"CUDA out of memory (simulated at batch {batch_size})")


@accelbench.register
class Slow(_Base):
    name = "fault-slow"

    def fault(self, batch_size: int) -> None:
        time.sleep(2.0)  # long enough to signal the command while this case runs


class _Planted(_Base):
    factor = 1.0
    _first: float | None = None

    def fault(self, batch_size: int) -> None:
        now = time.perf_counter()
        if self._first is None:
            self._first = now
        after = float(os.environ.get("THROTTLE_AFTER_S", "1.5"))
        deadline = now + 0.01 * (self.factor if now - self._first >= after else 1.0)
        time.sleep(max(0.0, deadline - time.perf_counter() - 0.006))
        while time.perf_counter() < deadline:
            pass


@accelbench.register
class ThrottleHalf(_Planted):
    name = "throttle-half"
    factor = 2.0


@accelbench.register
class SteadySleep(_Planted):
    name = "steady-sleep"
