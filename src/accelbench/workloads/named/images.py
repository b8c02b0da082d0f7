"""A named image classifier (timm, torchvision): random weights, synthetic images at the model's
own input size, cross-entropy over its own classes, SGD with momentum (ImageNetClassifier's step).

The tiny size uses batch 2 and, where the model accepts it, 64x64 images (convolutional networks
end in adaptive pooling); a model that insists on its input size (a ViT's fixed position
embeddings) keeps it. Which one applies is found by a forward pass on the meta device.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import torch
from torch import nn

from accelbench.data.options import DataOptions
from accelbench.data.synthetic import synthetic_epoch
from accelbench.workloads.base import Batch
from accelbench.workloads.builtin.imagenet import IMAGENET_SIZES, ImageNetClassifier, ImagePreset
from accelbench.workloads.named.shared import PUBLISHED_BATCH, TINY_BATCH, TINY_SAMPLES

TINY_SIDE = 64


def logits_of(output: Any) -> torch.Tensor:
    """The class scores of a model whose training output carries more (Inception's aux logits)."""
    if isinstance(output, torch.Tensor):
        return output
    if hasattr(output, "logits"):
        return output.logits
    return output[0]


class NamedImageClassifier(ImageNetClassifier):
    """Subclasses (one per name, made by a resolver) set ``build``, ``input_shape`` and
    ``presets`` (see ``image_presets``)."""

    lr = 0.01
    #: Builds the model with random weights (set per model name).
    build: ClassVar[Callable[[], nn.Module]]
    #: The model's own classes (its presets use them at both sizes).
    classes: ClassVar[int]

    def build_model(self) -> nn.Module:
        return type(self).build()

    def image_shape(self) -> tuple[int, ...]:
        return fitting_image_shape(type(self), self.preset.side)

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        shape, classes = self.image_shape(), self.num_classes()

        def make(generator: torch.Generator, size: int) -> Batch:
            images = torch.randn((size, *shape), generator=generator)
            return images, torch.randint(0, classes, (size,), generator=generator)
        return synthetic_epoch(make, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, labels = batch
        return nn.functional.cross_entropy(logits_of(model(images)), labels)

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, labels = batch
        return nn.functional.cross_entropy(logits_of(model(images)), labels, reduction="sum")


@functools.cache
def fitting_image_shape(cls: type[NamedImageClassifier], side: int) -> tuple[int, ...]:
    """The model's own input shape when ``side`` is its side; else (C, side, side) when a training
    forward at that size works on the meta device, and the model's own shape when it does not."""
    own = tuple(cls.input_shape)
    if side == own[-1]:
        return own
    channels = own[0]
    try:
        with torch.device("meta"):
            model = cls.build()
            model.train()
            model(torch.empty(TINY_BATCH["train"], channels, side, side))
    except Exception:  # the model fixes its input size: keep it
        return own
    return (channels, side, side)


def image_presets(input_shape: tuple[int, ...], classes: int) -> dict[str, ImagePreset]:
    """A named model's own input side and classes at the published size; at the tiny size, 64x64
    images where the model accepts them."""
    return {
        "published": ImagePreset(batch_size=PUBLISHED_BATCH, dataset_size=IMAGENET_SIZES,
                                 side=input_shape[-1], classes=classes),
        "tiny": ImagePreset(batch_size=TINY_BATCH, dataset_size=TINY_SAMPLES, side=TINY_SIDE,
                            classes=classes),
    }


def image_class(name: str, build: Callable[[], nn.Module], input_shape: tuple[int, ...], classes: int,
                version: int, description: str, source: str, **extra: Any) -> type[NamedImageClassifier]:
    attributes = dict(name=name, build=staticmethod(build), input_shape=tuple(input_shape),
                      classes=classes, presets=image_presets(tuple(input_shape), classes),
                      version=version,
                      description=description, source=source, **extra)
    return type(f"Named_{name}", (NamedImageClassifier,), attributes)
