"""torchvision ResNet-50 on ImageNet-shaped data, as in Apple's launch benchmark (batch 128)."""

from __future__ import annotations

from typing import ClassVar

import torchvision
from torch import nn

from accelbench.workloads.base import register
from accelbench.workloads.imagenet import ImageNetClassifier


@register
class ResNet50(ImageNetClassifier):
    name = "resnet50"
    description = "torchvision ResNet-50 (random init), 224x224, 1000 classes, SGD lr 0.1 momentum 0.9"
    source = "https://github.com/pytorch/vision/blob/main/torchvision/models/resnet.py"
    default_batch_size = {"train": 128, "eval": 128}
    tiny_batch_size = {"train": 4, "eval": 4}
    torchvision_weights: ClassVar[str] = "ResNet50_Weights.IMAGENET1K_V1"

    def build_model(self) -> nn.Module:
        if self.size == "tiny":
            # Same bottleneck blocks and stem, one block per stage: a test runs it in well under a second.
            return torchvision.models.ResNet(torchvision.models.resnet.Bottleneck, [1, 1, 1, 1],
                                             num_classes=self.num_classes())
        return torchvision.models.resnet50(weights=None)
