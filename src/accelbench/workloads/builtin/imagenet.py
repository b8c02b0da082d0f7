"""The shared step of the ImageNet-shaped classifiers (ResNet-50, VGG-16): synthetic normalised
images, cross-entropy, SGD with momentum."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.data.options import DataOptions
from accelbench.data.synthetic import synthetic_epoch
from accelbench.workloads.base import Batch, Workload
from accelbench.workloads.presets import Preset

#: ImageNet-1k's training and validation set sizes: one "epoch" of the stand-in data.
IMAGENET_SIZES = {"train": 1_281_167, "eval": 50_000}
TINY_SIZES = {"train": 8, "eval": 8}
#: The tiny size shrinks images (the models end in adaptive pooling, so any side >= 32 works)
#: and the classes.
TINY_SIDE, TINY_CLASSES = 32, 10


@dataclass(frozen=True)
class ImagePreset(Preset):
    #: Side of the square images.
    side: int
    classes: int


def image_batch_maker(side: int, classes: int) -> Callable[[torch.Generator, int], Batch]:
    """Batches shaped like normalised ImageNet crops: N(0, 1) pixels, uniform labels."""

    def make(generator: torch.Generator, batch_size: int) -> Batch:
        images = torch.randn((batch_size, 3, side, side), generator=generator)
        labels = torch.randint(0, classes, (batch_size,), generator=generator)
        return images, labels
    return make


class ImageNetClassifier(Workload):
    """A supervised image classifier on synthetic ImageNet-shaped data (no real-data loader yet)."""

    input_shape = (3, 224, 224)
    preset: ImagePreset
    lr: ClassVar[float] = 0.1
    momentum: ClassVar[float] = 0.9

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=self.lr, momentum=self.momentum)

    def num_classes(self) -> int:
        return self.preset.classes

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        return synthetic_epoch(image_batch_maker(self.preset.side, self.num_classes()),
                               self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(model(images), labels)

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(model(images), labels, reduction="sum")
