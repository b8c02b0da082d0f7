"""torchvision ResNet-50 on ImageNet-shaped data, as in Apple's launch benchmark (batch 128)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torchvision
from torch import nn

from accelbench.workloads.base import register
from accelbench.workloads.builtin.imagenet import (
    IMAGENET_SIZES,
    TINY_CLASSES,
    TINY_SIDE,
    TINY_SIZES,
    ImageNetClassifier,
    ImagePreset,
)


@dataclass(frozen=True)
class ResNetPreset(ImagePreset):
    #: Bottleneck blocks per stage: (3, 4, 6, 3) is ResNet-50.
    blocks: tuple[int, ...]


@register
class ResNet50(ImageNetClassifier):
    name = "resnet50"
    description = "torchvision ResNet-50 (random init), 224x224, 1000 classes, SGD lr 0.1 momentum 0.9"
    source = "https://github.com/pytorch/vision/blob/main/torchvision/models/resnet.py"
    presets = {
        "published": ResNetPreset(batch_size={"train": 128, "eval": 128}, dataset_size=IMAGENET_SIZES,
                                  side=224, classes=1000, blocks=(3, 4, 6, 3)),
        # Same bottleneck blocks and stem, one block per stage: a test runs it in well under a second.
        "tiny": ResNetPreset(batch_size={"train": 4, "eval": 4}, dataset_size=TINY_SIZES,
                             side=TINY_SIDE, classes=TINY_CLASSES, blocks=(1, 1, 1, 1)),
    }
    preset: ResNetPreset
    torchvision_weights: ClassVar[str] = "ResNet50_Weights.IMAGENET1K_V1"

    def build_model(self) -> nn.Module:
        # torchvision.models.resnet50(weights=None) is exactly this with blocks (3, 4, 6, 3).
        return torchvision.models.ResNet(torchvision.models.resnet.Bottleneck, list(self.preset.blocks),
                                         num_classes=self.num_classes())
