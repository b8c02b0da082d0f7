"""Workloads with a planted slowdown, loaded with --workload-file by the sustained tests.

``throttle-half``: each step sleeps 10 ms, and 20 ms once ``THROTTLE_AFTER_S`` seconds (default 1.5)
have passed since its first step: a device that loses half its speed at a known time.
``steady-sleep``: 10 ms a step throughout. A step sleeps all but its last 6 ms, so a busy
machine moves it little.
"""

from __future__ import annotations

import os
import time

import torch
import torch.nn.functional as F
from torch import nn

import accelbench
from accelbench.data.synthetic import synthetic_epoch

STEP_S = 0.01


def _batch(generator: torch.Generator, n: int):
    return torch.randn(n, 8, generator=generator), torch.randint(0, 2, (n,), generator=generator)


class _Sleeper(accelbench.Workload):
    description = "sleeps a planted time a step"
    default_batch_size = tiny_batch_size = {"train": 16, "eval": 16}
    dataset_size = tiny_dataset_size = {"train": 64, "eval": 64}
    factor = 1.0
    _first: float | None = None

    def build_model(self) -> nn.Module:
        return nn.Linear(8, 2)

    def make_optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.1)

    def make_batches(self, mode, batch_size, options):
        return synthetic_epoch(_batch, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model, batch):
        self.sleep()
        x, y = batch
        return F.cross_entropy(model(x), y)

    def eval_step(self, model, batch):
        self.sleep()
        return model(batch[0])

    def sleep(self) -> None:
        now = time.perf_counter()
        if self._first is None:
            self._first = now
        after = float(os.environ.get("THROTTLE_AFTER_S", "1.5"))
        deadline = now + STEP_S * (self.factor if now - self._first >= after else 1.0)
        # Sleep most of it (a sleep overshoots by a varying amount on a VM), then wait out the
        # exact rest: the step's time is what was planted.
        time.sleep(max(0.0, deadline - time.perf_counter() - 0.006))
        while time.perf_counter() < deadline:
            pass


@accelbench.register
class ThrottleHalf(_Sleeper):
    name = "throttle-half"
    factor = 2.0


@accelbench.register
class SteadySleep(_Sleeper):
    name = "steady-sleep"
