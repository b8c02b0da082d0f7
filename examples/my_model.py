"""An example of your own workload: run it with

    accelbench run --workload-file examples/my_model.py --device all
"""

from __future__ import annotations

import torch
from torch import nn

import accelbench
from accelbench.data.synthetic import synthetic_epoch


def random_batch(generator: torch.Generator, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch_size, 256, generator=generator), torch.randint(0, 10, (batch_size,),
                                                                            generator=generator)


@accelbench.register
class MyMLP(accelbench.Workload):
    name = "my-mlp"
    description = "A 3-layer MLP on 256 random features (example user workload)"
    source = "examples/my_model.py"
    input_shape = (256,)
    default_batch_size = {"train": 256, "eval": 1024}
    dataset_size = {"train": 50_000, "eval": 10_000}
    tiny_batch_size = {"train": 8, "eval": 8}
    tiny_dataset_size = {"train": 32, "eval": 16}

    def build_model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10))

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def make_batches(self, mode: str, batch_size: int, options: accelbench.DataOptions):
        return synthetic_epoch(random_batch, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model, batch):
        features, labels = batch
        return nn.functional.cross_entropy(model(features), labels)

    def eval_step(self, model, batch):
        features, labels = batch
        return nn.functional.cross_entropy(model(features), labels)
