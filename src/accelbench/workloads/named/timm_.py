"""``timm:NAME``: any timm model with random weights; input size and classes from its
``pretrained_cfg`` (read from timm's registry, never downloaded)."""

from __future__ import annotations

from types import ModuleType

from torch import nn

from accelbench.errors import UsageError
from accelbench.workloads.named.images import NamedImageClassifier, image_class
from accelbench.workloads.named.shared import import_library, version_number


def _timm() -> ModuleType:
    return import_library("timm", "timm", "timm")


def resolve(model: str) -> type[NamedImageClassifier]:
    timm = _timm()
    if not timm.is_model(model):
        raise UsageError(f"timm {timm.__version__} has no model {model!r}; see "
                         f"'accelbench list \"timm:*\"' for the names")
    cfg = timm.get_pretrained_cfg(model)
    input_size = tuple(getattr(cfg, "input_size", None) or (3, 224, 224))
    classes = int(getattr(cfg, "num_classes", None) or 1000)

    def build() -> nn.Module:
        return _timm().create_model(model, pretrained=False, num_classes=classes)

    return image_class(f"timm:{model}", build, input_size, classes,
                       version=version_number(timm.__version__),
                       description=f"timm {model} (random weights, timm {timm.__version__}), "
                       f"{'x'.join(map(str, input_size))}, {classes} classes, SGD",
                       source=f"https://huggingface.co/timm (timm.create_model({model!r}))")


def list_names(pattern: str) -> list[str]:
    return list(_timm().list_models(pattern))
