"""Published results, encoded as data with their source, so a user's run can be shown beside them.

Every figure of shared/reference/published-results.md is here, and nothing else: these are numbers
other people measured on other machines with other software versions. Renderers must label them
"published, not measured here". Figures that the documents only imply are marked ``derived``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

PUBLISHED_LABEL = "published, not measured here"


@dataclass(frozen=True)
class Source:
    #: Our internal copy of the document: for maintainers, never shown to users.
    document: str
    description: str
    #: How users see the source: its title, and its public address where one is known.
    title: str = ""
    address: str = ""

    @property
    def citation(self) -> str:
        return f"{self.title} ({self.address})" if self.address else f"{self.title} (no public address known)"


MNIST_DOC = Source("000_84d4d0c11cb8452a.txt",
                   "blog post: PyTorch on Apple M1 (MPS) vs a CUDA server, pytorch/examples mnist",
                   title="blog post \"Pytorch Apple Silicon GPU 训练与测评\" (PyTorch Apple silicon GPU "
                   "training and evaluation, 2022)")
SIMCLR_DOC = Source("002_e08c364320895614.txt",
                    "blog post: SimCLR ResNet-18 on CIFAR-10 on M1 Pro, M2 and an A6000",
                    title="Igor Susmelj (Lightly), \"Apple M1 and M2 performance for training SSL "
                    "models\" (2023; read in a Chinese translation)")
APPLE_DOCS = Source("003_24d6ce5360118627.txt; 004_b80967fa36924689.txt",
                    "Apple / PyTorch announcement of the MPS backend (M1 Ultra Mac Studio)",
                    title="PyTorch blog, \"Introducing Accelerated PyTorch Training on Mac\" (2022), "
                    "and the PyTorch 1.12 release post",
                    address="https://pytorch.org/blog/introducing-accelerated-pytorch-training-on-mac/; "
                    "https://pytorch.org/blog/pytorch-1.12-released/")
TORCHVISION = Source("torchvision model metadata (quoted in 002_e08c364320895614.txt)",
                     "torchvision.models weights metadata: num_params and GFLOPS",
                     title="torchvision model weights metadata (num_params, GFLOPS)",
                     address="https://pytorch.org/vision/stable/models.html")


@dataclass(frozen=True)
class EpochReference:
    """One published row of the machine | memory | CPU time | accelerator time | speedup table."""

    workload: str  # accelbench workload name (a shell pattern is allowed, e.g. "simclr*")
    mode: str
    machine: str
    accelerator: str  # device kind of the accelerator column: "mps", "cuda", or "" when none
    memory_gb: float | None
    cpu_epoch_s: float | None
    accel_epoch_s: float | None
    speedup: float | None  # as published (not recomputed), when the document states it
    batch_size: int
    source: Source
    caveats: str = ""
    derived: bool = False

    def matches(self, workload: str, mode: str) -> bool:
        return fnmatch.fnmatchcase(workload, self.workload) and mode == self.mode


MNIST_CAVEAT = ("pytorch/examples mnist/main.py, Adadelta lr 1.0; one training epoch (whether the "
                "test pass was inside the timing is not stated)")

#: PyTorch (1.7 and later) leaves ``torch.backends.cudnn.allow_tf32`` on by default, so a CNN
#: published as "fp32" on an Ampere or later NVIDIA GPU ran its convolutions in TF32 (10-bit
#: mantissa), which accelbench calls ``tf32``; its ``fp32`` turns cuDNN TF32 off.
TF32_CAVEAT = ("fp32 as published on an Ampere-or-later GPU: PyTorch's default "
               "cudnn.allow_tf32=True ran the convolutions in TF32 (accelbench's tf32, not its fp32)")

EPOCH_REFERENCES: tuple[EpochReference, ...] = (
    EpochReference("mnist", "train", "Apple M1 (MPS)", "mps", 16, 33.4, 19.6, 1.70, 64, MNIST_DOC,
                   MNIST_CAVEAT),
    EpochReference("mnist", "train", "Server with NVIDIA P100 (CUDA)", "cuda", 256, 34.2, 20.4, 1.67,
                   64, MNIST_DOC,
                   MNIST_CAVEAT + "; the P100 (Pascal) has no TF32: its fp32 is full fp32"),
    EpochReference("simclr*", "train", "NVIDIA A6000 (older PyTorch, 2022)", "cuda", None, None,
                   0.49 * 60, None, 128, SIMCLR_DOC,
                   "97.7 min for 200 epochs; epoch = training pass + kNN evaluation; 8 loader "
                   "workers; " + TF32_CAVEAT),
    EpochReference("simclr*", "train", "MacBook Pro 14\" 2021, M1 Pro, 14-core GPU", "mps", None,
                   59.3 * 60, 6.75 * 60, 8.8, 128, SIMCLR_DOC,
                   "13.5 min (MPS) and 118.6 min (CPU, 6P+2E cores) for 2 epochs; epoch includes kNN "
                   "evaluation; stated: 8.8x vs its CPU, 13.77x slower than the A6000"),
    EpochReference("simclr*", "train", "MacBook Air 13\" 2023, M2, 8-core GPU", "mps", None, None,
                   8.5 * 60, None, 128, SIMCLR_DOC,
                   "about 8.5 min: derived from 'the M1 Pro GPU was 26% faster'", derived=True),
)


@dataclass(frozen=True)
class ModelSize:
    model: str
    parameters: int
    gmacs: float  # torchvision's "GFLOPS" field counts multiply-adds at 224x224, batch 1
    source: Source = TORCHVISION


MODEL_SIZES: tuple[ModelSize, ...] = (
    ModelSize("vgg16", 138_357_544, 15.47),
    ModelSize("resnet18", 11_689_512, 1.81),
    ModelSize("resnet50", 25_557_032, 4.09),
)


@dataclass(frozen=True)
class RatioClaim:
    """A published speed ratio with no per-model figures behind it."""

    claim: str
    ratio: float
    qualifier: str  # "about" or "up to"
    machine: str
    workloads: str
    source: Source
    caveats: str = ""


RATIO_CLAIMS: tuple[RatioClaim, ...] = (
    RatioClaim("training, GPU (MPS) vs CPU", 7.0, "about",
               "Apple M1 Ultra Mac Studio, 20-core CPU, 64-core GPU, 128 GB",
               "ResNet-50 batch 128, BERT-base batch 64, VGG-16 batch 64", APPLE_DOCS,
               "per-model bars only in a figure; no exact per-model numbers published"),
    RatioClaim("evaluation, GPU (MPS) vs CPU", 20.0, "up to",
               "Apple M1 Ultra Mac Studio, 20-core CPU, 64-core GPU, 128 GB",
               "ResNet-50 batch 128, BERT-base batch 64, VGG-16 batch 64", APPLE_DOCS,
               "per-model bars only in a figure; no exact per-model numbers published"),
    RatioClaim("SimCLR epoch, M1 Pro GPU vs its CPU", 8.8, "about", "MacBook Pro 14\" 2021, M1 Pro",
               "SimCLR ResNet-18, CIFAR-10, batch 128", SIMCLR_DOC),
    RatioClaim("SimCLR epoch, A6000 vs M1 Pro GPU", 13.77, "about", "NVIDIA A6000 vs M1 Pro",
               "SimCLR ResNet-18, CIFAR-10, batch 128", SIMCLR_DOC, "different PyTorch versions"),
)


@dataclass(frozen=True)
class FeatureFinding:
    device: str
    feature: str
    status: str  # in the vocabulary of the feature probes: works | fails | wrong
    detail: str
    source: Source


FEATURE_FINDINGS: tuple[FeatureFinding, ...] = (
    FeatureFinding("mps", "VAE training (pytorch/examples vae)", "wrong",
                   "loss grew steadily until NaN on MPS while CPU trained normally", MNIST_DOC),
    FeatureFinding("mps", "autocast", "fails", "fp16 tensors worked on MPS but autocast did not",
                   SIMCLR_DOC),
    FeatureFinding("mps", "fp16 tensors", "works", "fp16 tensors worked on MPS", SIMCLR_DOC),
    FeatureFinding("mps", "torch.compile", "fails", "RuntimeError: Unsupported device type: mps",
                   SIMCLR_DOC),
)


APPLE_CHIPS_DOC = Source("published-results.md, \"Apple's GPU figures\"",
                         "Apple's press releases: GPU FP32 TFLOPS and unified-memory bandwidth "
                         "per Apple silicon chip",
                         title="Apple's press release for each chip (Apple Newsroom)",
                         address="https://www.apple.com/newsroom/")


@dataclass(frozen=True)
class ChipFigures:
    """A chip's published GPU ceilings. ``bandwidth_bytes_per_s`` is (lowest, highest): some
    chips ship in configurations with different memory bandwidth (M3 Max 300 or 400 GB/s)."""

    chip: str  # the whole chip name, as Apple writes it: "M2 Max"
    fp32_flops: float | None  # GPU FP32 FLOP/s; None where Apple published none
    bandwidth_bytes_per_s: tuple[float, float]
    source: Source = APPLE_CHIPS_DOC


def _chip(chip: str, fp32_tflops: float | None, low_gb_s: float,
          high_gb_s: float | None = None) -> ChipFigures:
    return ChipFigures(chip, None if fp32_tflops is None else fp32_tflops * 1e12,
                       (low_gb_s * 1e9, (high_gb_s or low_gb_s) * 1e9))


#: Every Apple chip of published-results.md, with its figures as published there.
APPLE_CHIPS: tuple[ChipFigures, ...] = (
    _chip("M1", 2.6, 68), _chip("M1 Pro", 5.2, 200), _chip("M1 Max", 10.4, 400),
    _chip("M1 Ultra", 21, 800),
    _chip("M2", 3.6, 100), _chip("M2 Pro", 6.8, 200), _chip("M2 Max", 13.6, 400),
    _chip("M2 Ultra", 27.2, 800),
    _chip("M3", None, 100), _chip("M3 Pro", None, 150), _chip("M3 Max", None, 300, 400),
    _chip("M3 Ultra", None, 819),
    _chip("M4", None, 120), _chip("M4 Pro", None, 273), _chip("M4 Max", None, 410, 546),
)


def epoch_references(workload: str, mode: str) -> list[EpochReference]:
    return [ref for ref in EPOCH_REFERENCES if ref.matches(workload, mode)]
