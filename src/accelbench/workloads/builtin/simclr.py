"""SimCLR with a ResNet-18 backbone on CIFAR-10, as in Lightly's CIFAR-10 benchmark.

The model, loss, optimiser and kNN evaluation follow the benchmark script the published M1/A6000
timings ran (``docs/source/getting_started/benchmarks/cifar10_benchmark.py`` in lightly-ai/lightly,
2022): projection head ``SimCLRProjectionHead(512, 512, 128)`` (Linear without bias, BatchNorm,
ReLU, Linear), NT-Xent at temperature 0.5 (lightly's ``NTXentLoss`` default), SGD at
``6e-2 * batch / 128`` with momentum 0.9 and weight decay 5e-4, and after each epoch a weighted kNN
classifier (k=200, temperature 0.1) over backbone embeddings of the training set.

Differences from that script, on purpose:
  * the backbone is torchvision's ResNet-18 with the usual CIFAR stem (3x3 stride-1 first
    convolution, no max-pool) instead of lightly's ``ResNetGenerator``; same blocks and widths.
  * the two augmented views are made on the step's device with ``torchvision.transforms.v2``
    applied to the whole batch, so each view draws one set of random parameters per batch (lightly
    draws per image, in CPU data-loader workers). The arithmetic per step is the same; only the
    learning signal is weaker, which matters for accuracy after many epochs, not for timing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, cast

import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torchvision.transforms import v2

from accelbench.data.cifar import NUM_CLASSES, check_cifar10, cifar_like_batch, load_cifar10
from accelbench.data.options import DataOptions
from accelbench.workloads.base import Batch, Workload, register
from accelbench.workloads.presets import Preset

# lightly's ``imagenet_normalize``, which its CIFAR-10 benchmark uses for every view.
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
TEMPERATURE = 0.5
KNN_K = 200
KNN_T = 0.1


@dataclass(frozen=True)
class BackbonePreset(Preset):
    #: Basic blocks per stage: (2, 2, 2, 2) is ResNet-18.
    blocks: tuple[int, ...]
    #: The CIFAR stem's stride: 1 keeps 32x32 maps before layer1, as the benchmark's network.
    stem_stride: int


def cifar_resnet18(blocks: tuple[int, ...] = (2, 2, 2, 2), stem_stride: int = 1) -> nn.Module:
    """torchvision's ResNet-18 with a CIFAR stem and no classifier: 512-d embeddings of 32x32 images."""
    net = torchvision.models.ResNet(torchvision.models.resnet.BasicBlock, list(blocks))
    # 32x32 inputs: a 7x7 stride-2 stem followed by max-pooling would leave 8x8 maps before layer1.
    net.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=stem_stride, padding=1, bias=False)
    net.maxpool = nn.Identity()
    net.fc = nn.Identity()
    return net


class SimCLRNet(nn.Module):
    def __init__(self, blocks: tuple[int, ...] = (2, 2, 2, 2), stem_stride: int = 1) -> None:
        super().__init__()
        self.backbone = cifar_resnet18(blocks, stem_stride)
        self.projection_head = nn.Sequential(
            nn.Linear(512, 512, bias=False), nn.BatchNorm1d(512), nn.ReLU(), nn.Linear(512, 128),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection_head(self.backbone(x))


def nt_xent_loss(z0: torch.Tensor, z1: torch.Tensor, temperature: float = TEMPERATURE) -> torch.Tensor:
    """NT-Xent: each of the 2N views must pick its partner among the 2N - 1 others (cosine / T)."""
    n = z0.shape[0]
    z = F.normalize(torch.cat([z0, z1]), dim=1)
    logits = z @ z.T / temperature
    self_pairs = torch.eye(2 * n, dtype=torch.bool, device=z.device)
    # A finite stand-in for minus infinity: the softmax weight is exactly 0 without risking NaN.
    logits = logits.masked_fill(self_pairs, torch.finfo(logits.dtype).min)
    partners = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)
    return F.cross_entropy(logits, partners)


def simclr_augment(side: int = 32) -> v2.Compose:
    """lightly's ``SimCLRCollateFunction(input_size=32, gaussian_blur=0.)`` on float images in [0, 1]."""
    return v2.Compose([
        v2.RandomResizedCrop(side, scale=(0.08, 1.0), antialias=True),
        v2.RandomHorizontalFlip(p=0.5),
        v2.RandomApply([v2.ColorJitter(0.7, 0.7, 0.7, 0.2)], p=0.8),
        v2.RandomGrayscale(p=0.2),
        v2.Normalize(MEAN, STD),
    ])


def to_unit_range(images: torch.Tensor, model: nn.Module) -> torch.Tensor:
    """uint8 CIFAR pixels to floats in [0, 1], in the model's parameter dtype (fp32, bf16, fp16)."""
    return images.to(next(model.parameters()).dtype).div(255.0)


def to_normalized(images: torch.Tensor, model: nn.Module) -> torch.Tensor:
    """uint8 CIFAR pixels to the normalised float images the test transforms give."""
    return v2.functional.normalize(to_unit_range(images, model), MEAN, STD)


def knn_predict(feature: torch.Tensor, feature_bank: torch.Tensor, feature_labels: torch.Tensor,
                num_classes: int, knn_k: int = KNN_K, knn_t: float = KNN_T) -> torch.Tensor:
    """Classes ranked by weighted kNN vote, the same computation as lightly's ``knn_predict``.

    ``feature`` (B, D) and ``feature_bank`` (D, N) are L2-normalised, so their product is cosine
    similarity; each of the k most similar bank entries votes for its label with weight
    exp(similarity / knn_t). Returns (B, num_classes) class indices, most likely first.
    """
    similarity = torch.mm(feature, feature_bank)
    weight, index = similarity.topk(k=knn_k, dim=-1)
    labels = torch.gather(feature_labels.expand(feature.size(0), -1), dim=-1, index=index)
    weight = (weight / knn_t).exp()
    one_hot = torch.zeros(feature.size(0) * knn_k, num_classes, device=labels.device)
    one_hot = one_hot.scatter(dim=-1, index=labels.view(-1, 1), value=1.0)
    scores = torch.sum(one_hot.view(feature.size(0), -1, num_classes) * weight.unsqueeze(dim=-1), dim=1)
    return scores.argsort(dim=-1, descending=True)


@register
class SimCLR(Workload):
    name = "simclr-resnet18"
    description = ("SimCLR on CIFAR-10 as Lightly's benchmark: ResNet-18 (CIFAR stem), NT-Xent T=0.5, "
                   "SGD; each epoch ends with a kNN (k=200) evaluation")
    source = ("https://github.com/lightly-ai/lightly/blob/master/docs/source/getting_started/"
              "benchmarks/cifar10_benchmark.py")
    input_shape = (3, 32, 32)
    presets = {
        "published": BackbonePreset(batch_size={"train": 128, "eval": 128},
                                    dataset_size={"train": 50_000, "eval": 10_000},
                                    blocks=(2, 2, 2, 2), stem_stride=1),
        # One block per stage, and a stride-2 stem that halves the maps (a quarter of the work).
        "tiny": BackbonePreset(batch_size={"train": 4, "eval": 8}, dataset_size={"train": 16, "eval": 8},
                               blocks=(1, 1, 1, 1), stem_stride=2),
    }
    preset: BackbonePreset
    data_kinds = ("synthetic", "real")
    #: The published figures are the ImageNet ResNet-18 at 224x224, not this CIFAR variant.
    torchvision_weights: ClassVar[str] = "ResNet18_Weights.IMAGENET1K_V1"
    torchvision_note: ClassVar[str] = "ImageNet ResNet-18 (224x224); this is its CIFAR variant (32x32)"

    def __init__(self, size: str = "published") -> None:
        super().__init__(size)
        self._augment = simclr_augment()
        self._real: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def build_model(self) -> nn.Module:
        return SimCLRNet(self.preset.blocks, self.preset.stem_stride)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        lr = 6e-2 * self.batch_size("train") / 128
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)

    def real_data(self, folder: Path, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        # Kept after the first read: re-reading the pickles would be timed into every kNN epoch end.
        if split not in self._real:
            self._real[split] = load_cifar10(folder, split)
        return self._real[split]

    def _epoch(self, split: str, batch_size: int, options: DataOptions, shuffle: bool) -> Iterable[Batch]:
        # A different seed per split: test images drawn like the memory bank's would sit in it.
        return self.epoch(split, batch_size, options, cifar_like_batch, shuffle,
                          seed_offset=1 if split == "eval" else 0)

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        return self._epoch(mode, batch_size, options, shuffle=mode == "train")

    def check_real_data(self, folder: Path, mode: str) -> None:
        # Training also needs the test split, for the kNN evaluation at each epoch's end.
        for split in ("train", "eval") if mode == "train" else (mode,):
            check_cifar10(folder, split)

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        pixels = to_unit_range(batch[0], model)
        # Two forwards, as lightly's training_step: batch-norm statistics are per view.
        return nt_xent_loss(model(self._augment(pixels)), model(self._augment(pixels)))

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return cast(SimCLRNet, model).backbone(to_normalized(batch[0], model))

    def _embed(self, model: SimCLRNet, batches: Iterable[Batch],
               device: str) -> tuple[torch.Tensor, torch.Tensor]:
        features, labels = [], []
        for images, targets in batches:
            embedding = model.backbone(to_normalized(images.to(device), model))
            features.append(F.normalize(embedding, dim=1))
            labels.append(targets.to(device))
        return torch.cat(features), torch.cat(labels)

    def end_of_epoch(self, model: nn.Module, device: str, options: DataOptions) -> dict[str, float]:
        """kNN top-1 accuracy on the test set with the training set (test transforms) as memory bank."""
        net = cast(SimCLRNet, model)
        batch_size = self.batch_size("eval")
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                bank, bank_labels = self._embed(net, self._epoch("train", batch_size, options, False),
                                                device)
                test, test_labels = self._embed(net, self._epoch("eval", batch_size, options, False),
                                                device)
                k = min(KNN_K, bank.shape[0])
                correct = 0
                for start in range(0, test.shape[0], batch_size):
                    ranked = knn_predict(test[start:start + batch_size], bank.T, bank_labels,
                                         NUM_CLASSES, k, KNN_T)
                    correct += int((ranked[:, 0] == test_labels[start:start + batch_size]).sum())
        finally:
            model.train(was_training)
        return {"knn_top1": correct / max(test.shape[0], 1)}
