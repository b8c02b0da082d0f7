"""The pytorch/examples MNIST network, exactly as ``mnist/main.py`` defines and trains it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.data.mnist import MEAN, STD, load_mnist
from accelbench.data.options import DataOptions
from accelbench.workloads.base import Batch, Workload, register
from accelbench.workloads.presets import Preset


class MnistNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def mnist_like_batch(generator: torch.Generator, batch_size: int) -> Batch:
    """Pixels as MNIST has them (0..255 integers, normalised the same way) and 10 classes."""
    pixels = torch.randint(0, 256, (batch_size, 1, 28, 28), generator=generator)
    images = (pixels.float() / 255.0 - MEAN) / STD
    labels = torch.randint(0, 10, (batch_size,), generator=generator)
    return images, labels


@register
class Mnist(Workload):
    name = "mnist"
    description = "pytorch/examples MNIST CNN (2 conv, max-pool, dropout, fc 128), Adadelta lr 1.0"
    source = "https://github.com/pytorch/examples/blob/main/mnist/main.py"
    input_shape = (1, 28, 28)
    presets = {
        "published": Preset(batch_size={"train": 64, "eval": 1000},
                            dataset_size={"train": 60_000, "eval": 10_000}),
        "tiny": Preset(batch_size={"train": 8, "eval": 16}, dataset_size={"train": 64, "eval": 32}),
    }
    data_kinds = ("synthetic", "real")

    def build_model(self) -> nn.Module:
        return MnistNet()

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adadelta(model.parameters(), lr=1.0)

    def real_data(self, folder: Path, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        return load_mnist(folder, split)

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        return self.epoch(mode, batch_size, options, mnist_like_batch)

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, labels = batch
        return F.nll_loss(model(images), labels)

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, labels = batch
        return F.nll_loss(model(images), labels, reduction="sum")
