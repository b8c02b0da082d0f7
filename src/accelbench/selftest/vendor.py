"""Vendors' published ceilings for devices accelbench knows by name (dense, no sparsity), as data.

Sources: NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100), NVIDIA A100
Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100); Apple's M1/M1 Pro/M1 Max/M2 press
releases (apple.com/newsroom) for GPU FP32 TFLOPS and unified-memory bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VendorFigures:
    source: str
    matmul_flops: dict[str, float]
    memory_bandwidth_bytes_per_s: float


def _nvidia(fp32: float, tf32: float, half: float, bandwidth: float, source: str) -> VendorFigures:
    return VendorFigures(source, {"fp32": fp32, "tf32": tf32, "bf16": half, "fp16": half}, bandwidth)


def _apple(fp32: float, bandwidth: float, source: str) -> VendorFigures:
    # Apple GPUs have no TF32; their fp16 rate is at most twice fp32.
    return VendorFigures(source, {"fp32": fp32, "tf32": fp32, "bf16": 2 * fp32, "fp16": 2 * fp32},
                         bandwidth)


#: Name fragment (lower case) -> figures; the first fragment found in the device name wins, so
#: the more specific names come first.
VENDOR_FIGURES: tuple[tuple[str, VendorFigures], ...] = (
    ("h100 pcie", _nvidia(51.2e12, 378e12, 756e12, 2.0e12, "NVIDIA H100 datasheet (PCIe)")),
    ("h100", _nvidia(67e12, 494.7e12, 989.4e12, 3.35e12, "NVIDIA H100 datasheet (SXM5)")),
    ("a100", _nvidia(19.5e12, 156e12, 312e12, 2.039e12, "NVIDIA A100 datasheet (80GB SXM)")),
    ("m1 max", _apple(10.4e12, 400e9, "Apple M1 Max press release")),
    ("m1 pro", _apple(5.2e12, 200e9, "Apple M1 Pro press release")),
    ("m1", _apple(2.6e12, 68.25e9, "Apple M1 press release")),
    ("m2", _apple(3.6e12, 100e9, "Apple M2 press release")),
)


def vendor_figures(device_name: str) -> VendorFigures | None:
    name = device_name.lower()
    return next((figures for fragment, figures in VENDOR_FIGURES if fragment in name), None)
