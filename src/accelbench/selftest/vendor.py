"""Vendors' published ceilings for the chips accelbench knows by name (dense, no sparsity), as data.

A device name is reduced to the whole chip it names ("Apple M2 Max GPU (MPS)" -> "M2 Max",
"NVIDIA H100 PCIe" -> "H100 PCIe") and looked up exactly: a fragment match would give an M1 Ultra
the M1's figures (a quarter of its own) and fail it against them. A chip not in the table gets no
vendor figures, and selftest falls back to physical bounds.

Sources: NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100), NVIDIA A100
Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100); Apple's press releases for each
chip, as encoded in :data:`accelbench.reference.published.APPLE_CHIPS` (GPU FP32 TFLOPS where
Apple published it, unified-memory bandwidth).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from accelbench.reference.published import APPLE_CHIPS, ChipFigures


@dataclass(frozen=True)
class VendorFigures:
    chip: str
    source: str
    #: Precision -> FLOP/s of large matrix products. A precision absent here has no published
    #: figure: physical bounds apply to it.
    matmul_flops: dict[str, float]
    #: (lowest, highest) bytes/s: chips that ship with different memory configurations.
    bandwidth_bytes_per_s: tuple[float, float]
    #: Precisions whose figure is a derived upper estimate, not a published rate: only the
    #: upper bound comes from it.
    upper_only: frozenset[str] = field(default_factory=frozenset)


def _nvidia(chip: str, fp32: float, tf32: float, half: float, bandwidth: float,
            source: str) -> VendorFigures:
    return VendorFigures(chip, source, {"fp32": fp32, "tf32": tf32, "bf16": half, "fp16": half},
                         (bandwidth, bandwidth))


def _apple(chip: ChipFigures) -> VendorFigures:
    flops: dict[str, float] = {}
    if chip.fp32_flops is not None:
        # Apple GPUs have no TF32 (tf32 runs fp32); their fp16 rate is at most twice fp32, an
        # upper estimate only (no half-precision rate is published; bf16 may be emulated).
        fp32 = chip.fp32_flops
        flops = {"fp32": fp32, "tf32": fp32, "bf16": 2 * fp32, "fp16": 2 * fp32}
    return VendorFigures(chip.chip, f"Apple {chip.chip}: {chip.source.title}", flops,
                         chip.bandwidth_bytes_per_s, frozenset({"bf16", "fp16"}))


#: Whole chip name -> figures.
VENDOR_FIGURES: dict[str, VendorFigures] = {
    figures.chip: figures for figures in (
        _nvidia("H100 PCIe", 51.2e12, 378e12, 756e12, 2.0e12, "NVIDIA H100 datasheet (PCIe)"),
        _nvidia("H100 SXM", 67e12, 494.7e12, 989.4e12, 3.35e12, "NVIDIA H100 datasheet (SXM5)"),
        _nvidia("A100", 19.5e12, 156e12, 312e12, 2.039e12, "NVIDIA A100 datasheet (80GB SXM)"),
        *(_apple(chip) for chip in APPLE_CHIPS),
    )
}

_APPLE_CHIP = re.compile(r"\b(M\d+)(?:\s+(Pro|Max|Ultra))?\b", re.IGNORECASE)


def chip_name(device_name: str) -> str | None:
    """The whole chip a device name names ("M1 Ultra", "H100 SXM", "A100"), whether or not the
    table knows it; None when the name names no chip family accelbench recognises."""
    words = re.split(r"[^a-z0-9]+", device_name.lower())
    if "apple" in words:
        match = _APPLE_CHIP.search(device_name)
        if match:
            return match.group(1).upper() + (f" {match.group(2).title()}" if match.group(2) else "")
        return None
    if "h100" in words:
        # torch reports an SXM5 board as "NVIDIA H100 80GB HBM3"; the PCIe and NVL boards say so.
        if "pcie" in words:
            return "H100 PCIe"
        return "H100 NVL" if "nvl" in words else "H100 SXM"
    if "a100" in words:
        return "A100"
    return None


def vendor_figures(device_name: str) -> VendorFigures | None:
    """The published figures of the chip ``device_name`` names; None for a chip not in the table."""
    chip = chip_name(device_name)
    return VENDOR_FIGURES.get(chip) if chip else None
