"""Workloads for the warm-worker tests (tests/engine/test_quick_tiny.py), loaded with --workload-file:

``leak-set`` changes everything process-wide a case can reach while it runs (torch's numeric
switches, determinism, the default dtype, the thread count, the environment, every seed), never
putting anything back; ``leak-check`` appends what it finds to the JSON lines file
``LEAK_REPORT`` names whenever it is made (the case makes it first thing, before its own set-up
changes anything; the parent makes it too, so each line says its pid). Run in that order in one
warm worker, ``leak-check`` must find a fresh process's state.
"""

from __future__ import annotations

import json
import os
import random

import torch
from torch import nn

import accelbench
from accelbench.data.synthetic import synthetic_epoch

#: The seed leak-set plants everywhere.
PLANTED_SEED = 1234


def _batch(generator: torch.Generator, n: int):
    return torch.randn(n, 8, generator=generator), torch.randint(0, 2, (n,), generator=generator)


class _Base(accelbench.Workload):
    description = "a tiny linear model for the warm-worker tests"
    modes = ("eval",)
    default_batch_size = tiny_batch_size = {"train": 4, "eval": 4}
    dataset_size = tiny_dataset_size = {"train": 16, "eval": 16}

    def build_model(self) -> nn.Module:
        return nn.Linear(8, 2)

    def make_optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.1)

    def make_batches(self, mode, batch_size, options):
        return synthetic_epoch(_batch, self.samples_per_epoch(mode), batch_size, options.seed)

    def eval_step(self, model, batch):
        return model(batch[0])


def plant() -> None:
    torch.set_float32_matmul_precision("medium")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    os.environ["ACCELBENCH_LEAKED"] = "1"
    torch.manual_seed(PLANTED_SEED)
    random.seed(PLANTED_SEED)


def state(name: str) -> dict[str, object]:
    """What a case finds: the switches, and the first draw of each generator."""
    return {
        "pid": os.getpid(), "name": name,
        "matmul": torch.get_float32_matmul_precision(),
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        "threads": torch.get_num_threads(),
        "environment": os.environ.get("ACCELBENCH_LEAKED"),
        "torch_draw": torch.rand(1, dtype=torch.float32).item(),
        "python_draw": random.random(),
    }


@accelbench.register
class LeakSet(_Base):
    name = "leak-set"

    def eval_step(self, model, batch):
        out = model(batch[0])
        plant()  # after the step's own work: the case itself still runs as it should
        return out


@accelbench.register
class LeakCheck(_Base):
    name = "leak-check"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        path = os.environ.get("LEAK_REPORT")
        if path:
            with open(path, "a") as report:
                report.write(json.dumps(state(self.name)) + "\n")


@accelbench.register
class LeakCheckAgain(LeakCheck):
    name = "leak-check-again"
