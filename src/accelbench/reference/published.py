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


# --- language models: batch-1 decode as the field publishes it ---------------------------------
LLM_DOC = "published-results.md, \"Language models, turn of 2026\""
GPT_FAST = Source(LLM_DOC, "gpt-fast README: Llama-2-7B batch-1 decode, bf16/int8/int4, A100-80GB",
                  title="pytorch-labs/gpt-fast README", address="https://github.com/pytorch-labs/gpt-fast")
TORCHAO = Source(LLM_DOC, "torchao README: Llama-3/3.1-8B batch-1 decode, bf16/int8/int4",
                 title="pytorch/ao (torchao) README, quantization benchmarks",
                 address="https://github.com/pytorch/ao")
PYTORCH_CI = Source(LLM_DOC, "PyTorch CI benchmarks/gpt_fast targets (random weights, A100-40GB)",
                    title="pytorch/pytorch benchmarks/gpt_fast/generate.py (CI targets)",
                    address="https://github.com/pytorch/pytorch/blob/main/benchmarks/gpt_fast/generate.py")
LLAMA_CPP_APPLE = Source(LLM_DOC, "llama.cpp discussion 4167: llama-bench on Apple silicon, LLaMA-2 7B",
                         title="ggml-org/llama.cpp discussion 4167, \"Performance of llama.cpp on Apple "
                         "Silicon M-series\"",
                         address="https://github.com/ggml-org/llama.cpp/discussions/4167")
LLAMA_CPP_CUDA = Source(LLM_DOC, "llama.cpp discussion 15013: llama-bench on CUDA, Q4_0",
                        title="ggml-org/llama.cpp discussion 15013, \"Performance of llama.cpp with CUDA\"",
                        address="https://github.com/ggml-org/llama.cpp/discussions/15013")

#: LLaMA-2 7B's file sizes as llama.cpp's table states them (Q4_0 3.83 GB, F16 13.5 GB); Q8_0's is
#: derived: 8.5 bits a weight (32 int8 values and an fp16 scale a block) x 6.74e9 weights.
LLAMA2_7B_BYTES = {"F16": 13.5e9, "Q4_0": 3.83e9, "Q8_0": 6.74e9 * 8.5 / 8}
#: llama.cpp's quantization types and gpt-fast's schemes as accelbench's precisions.
QUANTIZATION_PRECISION = {"F16": "bf16", "Q8_0": "int8-wo", "Q4_0": "int4-wo", "bf16": "bf16",
                          "int8 weight-only": "int8-wo", "int4 weight-only": "int4-wo"}


@dataclass(frozen=True)
class DecodeReference:
    """One published batch-1 generation figure. The comparable figure across runtimes is the
    bandwidth share: the bytes read per token x tokens/s over the device's bandwidth (a decode
    step reads every weight, whatever the runtime)."""

    device: str
    kind: str  # "mps", "cuda" or "cpu"
    runtime: str
    model: str
    quantization: str  # as the source names it: "Q4_0", "int4 weight-only" ...
    test: str  # "tg128", "pp512", "decode"
    tokens_per_s: float
    source: Source
    #: Bytes read per token (the model's size) where the source gives it or it can be derived.
    model_bytes: float | None = None
    #: GB/s achieved as the source publishes it (gpt-fast's "bandwidth achieved").
    achieved_bytes_per_s: float | None = None
    #: The device's stated bandwidth, where published.
    device_bandwidth_bytes_per_s: float | None = None
    caveats: str = ""
    derived: bool = False
    #: How the row executed, in words, and whether it is a compiled decode with CUDA graphs (gpt-fast's
    #: recipe; its int8 the dequantise-and-multiply inductor fuses): a row measured otherwise is
    #: never set beside it without saying so (render/published_generation.py).
    execution: str = ""
    cuda_graphs: bool = False

    @property
    def precision(self) -> str:
        return QUANTIZATION_PRECISION.get(self.quantization.split(" (")[0], "")

    @property
    def achieved(self) -> float | None:
        if self.achieved_bytes_per_s is not None:
            return self.achieved_bytes_per_s
        if self.model_bytes is not None and self.test != "pp512":
            return self.model_bytes * self.tokens_per_s
        return None

    @property
    def bandwidth_share(self) -> float | None:
        achieved, bandwidth = self.achieved, self.device_bandwidth_bytes_per_s
        return achieved / bandwidth if achieved is not None and bandwidth else None


def _apple(chip: str, f16: float | None, q8: float | None, q4_pp: float,
           q4_tg: float) -> list[DecodeReference]:
    bandwidth = next(c.bandwidth_bytes_per_s[1] for c in APPLE_CHIPS if c.chip == chip)
    rows = []
    for quantization, test, rate in (("F16", "tg128", f16), ("Q8_0", "tg128", q8),
                                     ("Q4_0", "pp512", q4_pp), ("Q4_0", "tg128", q4_tg)):
        if rate is not None:
            rows.append(DecodeReference(
                f"Apple {chip} (GPU, Metal)", "mps", "llama.cpp", "LLaMA-2 7B", quantization, test,
                rate, LLAMA_CPP_APPLE, model_bytes=LLAMA2_7B_BYTES[quantization],
                device_bandwidth_bytes_per_s=bandwidth, derived=quantization == "Q8_0",
                caveats="chip bandwidth as Apple states it" + (
                    "; Q8_0's size derived (8.5 bits a weight)" if quantization == "Q8_0" else ""),
                execution=LLAMA_CPP_RECIPE))
    return rows


#: gpt-fast's generate.py (and torchao's and PyTorch CI's copies of it) compile the decode step
#: fullgraph in a CUDA-graph mode (reduce-overhead; torchao max-autotune) with a static KV cache.
GRAPH_RECIPE = "compiled, CUDA graphs (gpt-fast's recipe)"
LLAMA_CPP_RECIPE = "llama.cpp's own kernels"


def _gpt_fast(source: Source, device: str, model: str, runtime: str,
              rows: tuple[tuple[str, float, float], ...], caveats: str,
              bandwidth: float | None = None) -> list[DecodeReference]:
    return [DecodeReference(device, "cuda", runtime, model, quantization, "decode", rate, source,
                            achieved_bytes_per_s=gb_s * 1e9, device_bandwidth_bytes_per_s=bandwidth,
                            caveats=caveats, derived=bandwidth is not None, execution=GRAPH_RECIPE,
                            cuda_graphs=True)
            for quantization, rate, gb_s in rows]


#: The A100's stated bandwidth as chsasank/device-benchmarks gives it ("~2000 GB/s" spec; the
#: 80 GB SXM part): approximate, so the shares against it are marked derived.
A100_SPEC_BYTES_PER_S = 2000e9

DECODE_REFERENCES: tuple[DecodeReference, ...] = (
    *_gpt_fast(GPT_FAST, "NVIDIA A100-80GB at 330 W", "Llama-2-7B", "gpt-fast (PyTorch, compiled)",
               (("bf16", 104.9, 1397), ("int8 weight-only", 155.6, 1069),
                ("int4 weight-only (group 32)", 196.8, 863)),
               "batch 1, 5-token prompt, torch.compile; bandwidth = model bytes x tokens/s; share "
               "against the ~2000 GB/s spec (chsasank/device-benchmarks)", A100_SPEC_BYTES_PER_S),
    *_gpt_fast(TORCHAO, "NVIDIA H100", "Llama-3.1-8B", "torchao (PyTorch, compiled)",
               (("bf16", 126.9, 1905), ("int8 weight-only", 198.9, 1495),
                ("int4 weight-only (group 64)", 241.4, 1019)),
               "batch 1; the H100's bandwidth is not in the reference document: no share"),
    *_gpt_fast(TORCHAO, "NVIDIA A100-80GB", "Llama-3-8B", "torchao (PyTorch, compiled)",
               (("bf16", 95.6, 1436), ("int8 weight-only", 153.0, 1151),
                ("int4 weight-only", 180.8, 763)),
               "batch 1; share against the ~2000 GB/s spec", A100_SPEC_BYTES_PER_S),
    *_gpt_fast(PYTORCH_CI, "NVIDIA A100-40GB", "Llama-2-7B", "PyTorch CI gpt_fast (random weights)",
               (("bf16", 94, 1253), ("int8 weight-only", 144, 957)),
               "CI targets, random weights; the 40 GB part's bandwidth is not in the document: no share"),
    DecodeReference("Apple M1 (CPU)", "cpu", "torchao (PyTorch, compiled)", "Llama-3.1-8B", "bf16",
                    "decode", 1.24, TORCHAO, caveats="M1 Mac CPU, torch.compile",
                    execution="compiled (a CPU has no CUDA graphs)"),
    *_apple("M1", None, 7.91, 117.96, 14.15), *_apple("M1 Pro", 12.75, 22.34, 266.25, 36.41),
    *_apple("M1 Max", 23.03, 40.20, 530.06, 61.19), *_apple("M2", 6.72, 12.21, 179.57, 21.91),
    *_apple("M2 Ultra", 41.02, 66.64, 1238.48, 94.27), *_apple("M3 Max", 25.09, 42.75, 759.70, 66.31),
    *_apple("M4", 7.43, 13.54, 221.29, 24.11), *_apple("M4 Max", 31.64, 54.05, 885.68, 83.06),
    *[DecodeReference(device, "cuda", "llama.cpp", "LLaMA-2 7B", "Q4_0", test, rate, LLAMA_CPP_CUDA,
                      model_bytes=LLAMA2_7B_BYTES["Q4_0"] if test == "tg128" else None,
                      execution=LLAMA_CPP_RECIPE)
      for device, pp, tg in (("NVIDIA H100", 9918, 268), ("NVIDIA RTX 4090", 11993, 186),
                             ("NVIDIA A100", 4850, 191))
      for test, rate in (("pp512", pp), ("tg128", tg))],
)


def decode_references(precision: str | None = None, kind: str | None = None) -> list[DecodeReference]:
    """The published generation rows, of accelbench's ``precision`` (bf16/fp16 for F16 and bf16,
    int8-wo, int4-wo) and device ``kind`` where given."""
    wanted = {"fp16": "bf16"}.get(precision or "", precision)
    return [row for row in DECODE_REFERENCES
            if (wanted is None or row.precision == wanted) and (kind is None or row.kind == kind)]
