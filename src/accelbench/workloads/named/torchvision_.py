"""``torchvision:NAME``: a torchvision classification model with random weights; input size and
classes from its default weights' metadata (read from torchvision, never downloaded)."""

from __future__ import annotations

import torchvision
from torch import nn

from accelbench.errors import UsageError
from accelbench.workloads.named.images import NamedImageClassifier, image_class
from accelbench.workloads.named.shared import version_number


def list_names(pattern: str = "*") -> list[str]:
    # Classification models only: detection and segmentation models take targets, not labels.
    return list(torchvision.models.list_models(module=torchvision.models, include=pattern))


def resolve(model: str) -> type[NamedImageClassifier]:
    if model not in list_names():
        raise UsageError(f"torchvision {torchvision.__version__} has no classification model "
                         f"{model!r}; see 'accelbench list \"torchvision:*\"' for the names")
    weights = torchvision.models.get_model_weights(model).DEFAULT
    side = int(weights.transforms.keywords.get("crop_size", 224))
    classes = len(weights.meta["categories"])

    def build() -> nn.Module:
        return torchvision.models.get_model(model, weights=None, num_classes=classes)

    return image_class(f"torchvision:{model}", build, (3, side, side), classes,
                       version=version_number(torchvision.__version__),
                       description=f"torchvision {model} (random weights, torchvision "
                       f"{torchvision.__version__}), 3x{side}x{side}, {classes} classes, SGD",
                       source=f"https://pytorch.org/vision/stable/models.html ({model})",
                       torchvision_weights=f"{type(weights).__name__}.{weights.name}")
