"""torchvision VGG-16 on ImageNet-shaped data, as in Apple's launch benchmark (batch 64)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torchvision
from torch import nn
from torchvision.models.vgg import cfgs, make_layers

from accelbench.errors import UsageError
from accelbench.workloads.base import register
from accelbench.workloads.builtin.imagenet import (
    IMAGENET_SIZES,
    TINY_CLASSES,
    TINY_SIDE,
    TINY_SIZES,
    ImageNetClassifier,
    ImagePreset,
)

HEADS = ("vgg", "linear")


@dataclass(frozen=True)
class VggPreset(ImagePreset):
    #: "vgg": torchvision's 7x7 pooling and 3-layer 4096-wide classifier; "linear": global average
    #: pooling and one linear layer.
    head: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.head not in HEADS:
            raise UsageError(f"VggPreset head {self.head!r}; allowed: {', '.join(HEADS)}")


@register
class Vgg16(ImageNetClassifier):
    name = "vgg16"
    description = "torchvision VGG-16 (random init), 224x224, 1000 classes, SGD lr 0.01 momentum 0.9"
    source = "https://github.com/pytorch/vision/blob/main/torchvision/models/vgg.py"
    presets = {
        "published": VggPreset(batch_size={"train": 64, "eval": 64}, dataset_size=IMAGENET_SIZES,
                               side=224, classes=1000, head="vgg"),
        # VGG-16's 13 convolutions, but a one-layer head instead of the 120M-parameter classifier
        # that dominates construction time and the optimiser step at 32x32.
        "tiny": VggPreset(batch_size={"train": 2, "eval": 4}, dataset_size=TINY_SIZES,
                          side=TINY_SIDE, classes=TINY_CLASSES, head="linear"),
    }
    preset: VggPreset
    # torchvision's classification reference recipe trains the VGG models at lr 0.01.
    lr = 0.01
    torchvision_weights: ClassVar[str] = "VGG16_Weights.IMAGENET1K_V1"

    def build_model(self) -> nn.Module:
        if self.preset.head == "linear":
            return nn.Sequential(make_layers(cfgs["D"]), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(512, self.num_classes()))
        return torchvision.models.vgg16(weights=None, num_classes=self.num_classes())
