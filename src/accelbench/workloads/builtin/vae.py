"""The pytorch/examples variational autoencoder, exactly as ``vae/main.py`` defines and trains it.

This is the workload whose loss grew to NaN on MPS while training normally on the CPU (see the
published results): the runner's non-finite check turns such a run into a ``nan`` status.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.data.mnist import MEAN, STD, load_mnist
from accelbench.data.options import DataOptions
from accelbench.workloads.base import Batch, Noise, Workload, register
from accelbench.workloads.presets import Preset


class VAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.noise = Noise()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        std = torch.exp(0.5 * logvar)
        # torch's RNG, unless a parity check gives the Noise module a generator shared by both sides.
        eps = self.noise.randn_like(std)
        return mu + eps * std

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def vae_loss(recon_x: torch.Tensor, x: torch.Tensor, mu: torch.Tensor,
             logvar: torch.Tensor) -> torch.Tensor:
    """Reconstruction (binary cross-entropy, summed) + KL divergence to the unit Gaussian."""
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def unit_mnist_batch(generator: torch.Generator, batch_size: int) -> Batch:
    """MNIST-shaped pixels in [0, 1] (``transforms.ToTensor()`` only, as the example loads them)."""
    pixels = torch.randint(0, 256, (batch_size, 1, 28, 28), generator=generator)
    labels = torch.randint(0, 10, (batch_size,), generator=generator)
    return pixels.float() / 255.0, labels


@register
class Vae(Workload):
    name = "vae"
    description = "pytorch/examples VAE (784-400-20-400-784), BCE(sum) + KL loss, Adam lr 1e-3"
    source = "https://github.com/pytorch/examples/blob/main/vae/main.py"
    input_shape = (1, 28, 28)
    presets = {
        "published": Preset(batch_size={"train": 128, "eval": 128},
                            dataset_size={"train": 60_000, "eval": 10_000}),
        "tiny": Preset(batch_size={"train": 8, "eval": 16}, dataset_size={"train": 64, "eval": 32}),
    }
    data_kinds = ("synthetic", "real")

    def build_model(self) -> nn.Module:
        return VAE()

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=1e-3)

    def real_data(self, folder: Path, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        images, labels = load_mnist(folder, split)
        # load_mnist normalises for the classifier; the VAE's BCE target needs raw [0, 1] pixels.
        return (images * STD + MEAN).clamp_(0.0, 1.0), labels

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        return self.epoch(mode, batch_size, options, unit_mnist_batch)

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images = batch[0]
        recon, mu, logvar = model(images)
        return vae_loss(recon, images, mu, logvar)

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        # As the example's test(): the forward still samples z, and the loss is summed.
        images = batch[0]
        recon, mu, logvar = model(images)
        return vae_loss(recon, images, mu, logvar)
