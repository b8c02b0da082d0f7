"""The built-in published results: every figure of the reference document, with its source."""

from __future__ import annotations

import pytest

from accelbench.reference.published import (
    EPOCH_REFERENCES,
    FEATURE_FINDINGS,
    MODEL_SIZES,
    RATIO_CLAIMS,
    epoch_references,
)


def test_mnist_table() -> None:
    rows = {r.machine: r for r in epoch_references("mnist", "train")}
    m1, p100 = rows["Apple M1 (MPS)"], rows["Server with NVIDIA P100 (CUDA)"]
    assert (m1.memory_gb, m1.cpu_epoch_s, m1.accel_epoch_s, m1.speedup) == (16, 33.4, 19.6, 1.70)
    assert (p100.memory_gb, p100.cpu_epoch_s, p100.accel_epoch_s, p100.speedup) == (256, 34.2, 20.4, 1.67)
    for row in (m1, p100):
        # The published speedup agrees with the published times (1.676 was published as 1.67).
        assert row.cpu_epoch_s / row.accel_epoch_s == pytest.approx(row.speedup, abs=0.01)
        assert row.batch_size == 64 and row.source.document == "000_84d4d0c11cb8452a.txt"
    assert epoch_references("mnist", "eval") == []


def test_simclr_minutes_per_epoch() -> None:
    rows = epoch_references("simclr-resnet18", "train")
    minutes = {r.machine.split(",")[0]: (r.cpu_epoch_s, r.accel_epoch_s, r.derived) for r in rows}
    assert minutes["NVIDIA A6000 (older PyTorch"][1] == pytest.approx(0.49 * 60)
    m1_pro = next(r for r in rows if "M1 Pro" in r.machine)
    assert (m1_pro.cpu_epoch_s, m1_pro.accel_epoch_s) == pytest.approx((59.3 * 60, 6.75 * 60))
    m2 = next(r for r in rows if "M2" in r.machine)
    assert m2.derived and m2.accel_epoch_s == pytest.approx(8.5 * 60)
    assert all(not r.derived for r in rows if r is not m2)
    assert all(r.batch_size == 128 for r in rows)


def test_model_sizes_match_torchvision_metadata() -> None:
    torchvision = pytest.importorskip("torchvision")
    sizes = {m.model: m for m in MODEL_SIZES}
    assert (sizes["vgg16"].parameters, sizes["vgg16"].gmacs) == (138_357_544, 15.47)
    assert (sizes["resnet18"].parameters, sizes["resnet18"].gmacs) == (11_689_512, 1.81)
    assert (sizes["resnet50"].parameters, sizes["resnet50"].gmacs) == (25_557_032, 4.09)
    # The weights' metadata ships with torchvision (no download needed).
    meta = torchvision.models.get_model_weights("resnet18").IMAGENET1K_V1.meta
    assert meta["num_params"] == sizes["resnet18"].parameters
    assert meta["_ops"] == pytest.approx(sizes["resnet18"].gmacs, abs=0.01)


def test_ratios_and_features() -> None:
    ratios = {r.claim: r for r in RATIO_CLAIMS}
    assert ratios["training, GPU (MPS) vs CPU"].ratio == 7.0
    evaluation = ratios["evaluation, GPU (MPS) vs CPU"]
    assert (evaluation.ratio, evaluation.qualifier) == (20.0, "up to")
    assert "no exact per-model numbers" in evaluation.caveats
    findings = {f.feature: f for f in FEATURE_FINDINGS}
    assert "NaN" in findings["VAE training (pytorch/examples vae)"].detail
    assert findings["autocast"].status == "fails"
    assert findings["torch.compile"].detail == "RuntimeError: Unsupported device type: mps"


def test_every_reference_has_a_source() -> None:
    for item in (*EPOCH_REFERENCES, *MODEL_SIZES, *RATIO_CLAIMS, *FEATURE_FINDINGS):
        assert item.source.document and item.source.description


def test_apple_chip_figures_are_those_published() -> None:
    from accelbench.reference.published import APPLE_CHIPS

    chips = {c.chip: c for c in APPLE_CHIPS}
    # "M1 2.6 / 68 GB/s; ... M2 Ultra 27.2 / 800; M3 100 GB/s, ..., M3 Max 300-400, ... M4 Max 410-546"
    assert (chips["M1"].fp32_flops, chips["M1"].bandwidth_bytes_per_s) == (2.6e12, (68e9, 68e9))
    assert chips["M1 Ultra"].fp32_flops == 21e12 and chips["M2 Ultra"].fp32_flops == 27.2e12
    assert chips["M2 Pro"].fp32_flops == 6.8e12 and chips["M2 Max"].fp32_flops == 13.6e12
    assert chips["M3 Pro"].fp32_flops is None  # Apple gave no TFLOPS figure from the M3 on
    assert chips["M3 Max"].bandwidth_bytes_per_s == (300e9, 400e9)
    assert chips["M4 Max"].bandwidth_bytes_per_s == (410e9, 546e9)
    assert len(chips) == 15 and all(c.source.citation.startswith("Apple's press release")
                                    for c in APPLE_CHIPS)
