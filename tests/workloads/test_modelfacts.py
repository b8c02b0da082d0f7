"""Model facts against torchvision's published figures, and the cached peak-FLOP/s measurement."""

from __future__ import annotations

import json

import pytest
import torch
import torchvision

from accelbench.devices import DeviceSet
from accelbench.measure.ceilings import peak
from accelbench.workloads import facts as modelfacts
from accelbench.workloads import get_workload_class
from accelbench.workloads.facts import (
    TORCHVISION_LABEL,
    flops_per_sample,
    model_facts,
    torchvision_figures,
)

# Published in torchvision's weights metadata (quoted by the SimCLR report): params, GMACs at 224x224.
PUBLISHED = {
    "VGG16_Weights.IMAGENET1K_V1": (138_357_544, 15.47),
    "ResNet18_Weights.IMAGENET1K_V1": (11_689_512, 1.81),
    "ResNet50_Weights.IMAGENET1K_V1": (25_557_032, 4.09),
}


@pytest.mark.parametrize("weights", sorted(PUBLISHED))
def test_torchvision_figures_are_the_published_ones(weights: str) -> None:
    figures = torchvision_figures(weights)
    params, gmacs = PUBLISHED[weights]
    assert figures.parameters == params
    assert round(figures.gmacs, 2) == gmacs
    assert figures.label == TORCHVISION_LABEL == "torchvision published (multiply-adds)"
    assert "ImageNet-1K" in figures.metrics


@pytest.mark.parametrize(("name", "weights"), [("vgg16", "VGG16_Weights.IMAGENET1K_V1"),
                                               ("resnet50", "ResNet50_Weights.IMAGENET1K_V1")])
def test_counted_model_matches_torchvision(name: str, weights: str) -> None:
    facts = model_facts(name)
    params, gmacs = PUBLISHED[weights]
    assert facts.parameters == params
    assert facts.torchvision is not None and facts.torchvision.weights == weights
    # counted FLOPs are 2 per multiply-add
    assert facts.forward_flops_per_sample == pytest.approx(2 * gmacs * 1e9, rel=0.05)
    # a counted training step (forward + backward) is close to the usual 3x-forward estimate
    assert facts.flops_per_sample["train"] == pytest.approx(3 * facts.forward_flops_per_sample, rel=0.05)
    assert flops_per_sample(name, "eval") == facts.forward_flops_per_sample


def test_plain_resnet18_counts_as_published() -> None:
    with torch.device("meta"):
        model = torchvision.models.resnet18()
    assert sum(p.numel() for p in model.parameters()) == 11_689_512
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        model(torch.empty(1, 3, 224, 224, device="meta"))
    assert counter.get_total_flops() == pytest.approx(2 * 1.81e9, rel=0.05)


def test_simclr_facts_count_two_views_and_label_the_reference_as_another_model() -> None:
    facts = model_facts("simclr-resnet18")
    forward = facts.forward_flops_per_sample
    assert forward == pytest.approx(2 * 0.556e9, rel=0.05)  # ResNet-18, CIFAR stem, 32x32
    # two augmented views, each forward + backward (~3x) through backbone and head
    assert 5.5 * forward < facts.flops_per_sample["train"] < 6.2 * forward
    assert facts.torchvision is not None and "CIFAR" in facts.torchvision.note


def test_facts_carry_sizes_modes_and_availability() -> None:
    facts = model_facts("vae")
    assert facts.default_batch_size == {"train": 128, "eval": 128}
    assert facts.dataset_size == {"train": 60_000, "eval": 10_000}
    assert facts.modes == ("train", "eval") and facts.input_shape == (1, 28, 28)
    assert facts.available and facts.torchvision is None
    assert facts.parameters == 784 * 400 + 400 + 2 * (400 * 20 + 20) + 20 * 400 + 400 + 400 * 784 + 784
    data = facts.to_dict()
    assert json.loads(json.dumps(data))["dataset_size"]["train"] == 60_000


def test_counting_falls_back_to_the_cpu_when_meta_cannot_run(monkeypatch) -> None:
    real = modelfacts.count_flops

    def meta_fails(workload, mode, device="meta"):
        if device == "meta":
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        return real(workload, mode, device)

    workload = get_workload_class("mnist")("tiny")
    monkeypatch.setattr(modelfacts, "count_flops", meta_fails)
    flops, params, where = modelfacts._count_anywhere(workload, "eval")
    assert where == "cpu"
    assert (flops, params) == real(workload, "eval", "meta")
    multiply_adds = 32 * 9 * 26**2 + 64 * 32 * 9 * 24**2 + 9216 * 128 + 128 * 10  # MNIST CNN by hand
    assert flops == pytest.approx(2 * multiply_adds, rel=0.01)


# --- peak FLOP/s ----------------------------------------------------------------------------
@pytest.fixture
def cpu():
    return DeviceSet.current().select("cpu")[0]


@pytest.fixture
def default_peak_cache(accelbench_home, monkeypatch):
    """The default cache location, even where the test session shares one (ACCELBENCH_PEAK_CACHE)."""
    monkeypatch.delenv("ACCELBENCH_PEAK_CACHE", raising=False)
    assert peak.cache_path() == accelbench_home / "peak_flops.json"
    return accelbench_home / "peak_flops.json"


def test_peak_is_measured_once_then_cached(cpu, default_peak_cache, monkeypatch) -> None:
    first = peak.measured_peak_flops(cpu, torch.float32, side=128)
    assert first > 1e6  # any CPU does a million FLOP/s
    cache = json.loads(default_peak_cache.read_text())
    assert cache["version"] == peak.CACHE_VERSION
    (key, entry), = cache["entries"].items()
    assert key == peak.cache_key(cpu, torch.float32)
    assert "cpu" in key and torch.__version__ in key and "float32" in key
    assert entry["flops"] == first and entry["matrix_side"] == 128

    def must_not_time(*args, **kwargs):
        raise AssertionError("a cached figure must not be measured again")

    monkeypatch.setattr(peak, "time_matmul", must_not_time)
    assert peak.measured_peak_flops(cpu, torch.float32) == first
    monkeypatch.setattr(peak, "time_matmul", lambda device, dtype, side: 123.0)
    assert peak.measured_peak_flops(cpu, torch.float32, refresh=True) == 123.0
    # another dtype is another entry
    assert peak.measured_peak_flops(cpu, torch.bfloat16) == 123.0
    assert len(json.loads(default_peak_cache.read_text())["entries"]) == 2


def test_a_damaged_cache_is_measured_again(cpu, default_peak_cache, monkeypatch) -> None:
    default_peak_cache.parent.mkdir(parents=True)
    default_peak_cache.write_text("{not json")
    monkeypatch.setattr(peak, "time_matmul", lambda device, dtype, side: 7.0)
    assert peak.measured_peak_flops(cpu) == 7.0
    assert json.loads(default_peak_cache.read_text())["entries"]
