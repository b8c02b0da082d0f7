"""Vendors' published ceilings for the accelerators accelbench knows by name (dense, no sparsity),
as data: what selftest judges a measured peak against, and what a shared line's plausibility can
read per device class.

A device name (torch's ``get_device_properties(i).name``, the MPS adapter's chip name) is reduced
to the whole chip it names ("NVIDIA A100-SXM4-80GB" -> "A100 SXM 80GB", "Apple M2 Max GPU (MPS)"
-> "M2 Max") by its words, never by a fragment: "A10" is not "A100", "L4" not "L40S", an "M1
Ultra" not an "M1", and a variant the table does not list ("RTX 4090 D", "RTX 4090 Laptop GPU",
"V100S") is named but gets no figures. A MIG slice ("... MIG 3g.40gb") is held to ``g`` sevenths
of its chip's compute figures (NVIDIA's MIG profiles split a GPU into seven compute slices) and
to its chip's bandwidth as an upper bound only. A chip not in the table gets no vendor figures:
selftest falls back to physical bounds and counts those checks apart.

Every figure is the datasheet's dense rate (the tensor-core figures NVIDIA prints "with sparsity"
are halved), per device as torch sees it: one MI250X module is two GCDs, two torch devices, each
with half the module's figures. Sources are named per chip; where a figure is less certain than
a datasheet line it says so in ``source``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.reference.published import APPLE_CHIPS, ChipFigures

T, G = 1e12, 1e9


@dataclass(frozen=True)
class VendorFigures:
    chip: str
    source: str
    #: Precision -> FLOP/s of large matrix products. A precision absent here has no published
    #: figure: physical bounds apply to it.
    matmul_flops: dict[str, float]
    #: (lowest, highest) bytes/s: chips that ship with different memory configurations.
    bandwidth_bytes_per_s: tuple[float, float]
    #: Precisions whose figure bounds a reading from above only (a derived estimate, or a rate
    #: torch may not reach by this name): the lower bound is physical.
    upper_only: frozenset[str] = field(default_factory=frozenset)
    #: Why the upper-only precisions are (said beside the check).
    upper_only_why: str = ""
    #: A MIG slice's share of its chip's compute (g of 7); None for a whole chip.
    slice_share: float | None = None

    @property
    def bandwidth_upper_only(self) -> bool:
        """A MIG slice's memory bandwidth is no published figure: its chip's bounds it above."""
        return self.slice_share is not None

    def half_to_fp32(self) -> float | None:
        """bf16 matmul FLOP/s over fp32's as published, where both are published in full."""
        if {"fp32", "bf16"} & self.upper_only or "fp32" not in self.matmul_flops \
                or "bf16" not in self.matmul_flops:
            return None
        return self.matmul_flops["bf16"] / self.matmul_flops["fp32"]


def _chip(chip: str, source: str, fp32: float, tf32: float | None, bf16: float | None,
          fp16: float | None, bandwidth: float | tuple[float, float],
          upper_only: tuple[str, ...] = (), why: str = "") -> VendorFigures:
    """Figures in TFLOP/s and GB/s as datasheets print them. A chip without TF32 (before Ampere,
    Apple's GPUs, CDNA2) computes tf32 as fp32: its tf32 figure is its fp32 figure."""
    flops = {name: value * T for name, value in
             (("fp32", fp32), ("tf32", fp32 if tf32 is None else tf32), ("bf16", bf16), ("fp16", fp16))
             if value is not None}
    low, high = bandwidth if isinstance(bandwidth, tuple) else (bandwidth, bandwidth)
    return VendorFigures(chip, source, flops, (low * G, high * G), frozenset(upper_only), why)


def _apple(chip: ChipFigures) -> VendorFigures:
    flops: dict[str, float] = {}
    if chip.fp32_flops is not None:
        # Apple GPUs have no TF32 (tf32 runs fp32); their fp16 rate is at most twice fp32, an
        # upper estimate only (no half-precision rate is published; bf16 may be emulated).
        fp32 = chip.fp32_flops
        flops = {"fp32": fp32, "tf32": fp32, "bf16": 2 * fp32, "fp16": 2 * fp32}
    return VendorFigures(chip.chip, f"Apple {chip.chip}: {chip.source.title}", flops,
                         chip.bandwidth_bytes_per_s, frozenset({"bf16", "fp16"}),
                         "Apple publishes no half-precision rate: at most twice fp32")


_H100 = "NVIDIA H100 Tensor Core GPU datasheet"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet"
_ROCM_TF32 = "torch on ROCm computes tf32 as fp32 unless hipBLASLt's XF32 is enabled"

#: Whole chip name -> figures (dense TFLOP/s: fp32, tf32, bf16, fp16; memory GB/s).
VENDOR_FIGURES: dict[str, VendorFigures] = {figures.chip: figures for figures in (
    _chip("H100 SXM", f"{_H100} (SXM5)", 67, 494.7, 989.4, 989.4, 3350),
    _chip("H100 PCIe", f"{_H100} (PCIe)", 51.2, 378, 756, 756, 2000),
    _chip("H100 NVL", f"{_H100} (NVL)", 60, 417.5, 835.5, 835.5, 3900),
    _chip("H200 SXM", f"{_H200} (SXM)", 67, 494.5, 989.5, 989.5, 4800),
    _chip("H200 NVL", f"{_H200} (NVL)", 60, 417.5, 835.5, 835.5, 4800),
    _chip("GH200", "NVIDIA GH200 Grace Hopper Superchip datasheet (96 GB HBM3 4 TB/s or 144 GB "
          "HBM3e 4.9 TB/s)", 67, 494, 990, 990, (4000, 4900)),
    _chip("B200", "NVIDIA HGX B200 datasheet, per GPU (the 8-GPU board's figures / 8); NVIDIA's "
          "B200 documents differ by a few percent with the power configuration: less certain",
          75, 1125, 2250, 2250, (7700, 8000)),
    _chip("A100 SXM 40GB", f"{_A100} (40GB SXM)", 19.5, 156, 312, 312, 1555),
    _chip("A100 SXM 80GB", f"{_A100} (80GB SXM)", 19.5, 156, 312, 312, 2039),
    _chip("A100 PCIe 40GB", f"{_A100} (40GB PCIe)", 19.5, 156, 312, 312, 1555),
    _chip("A100 PCIe 80GB", f"{_A100} (80GB PCIe)", 19.5, 156, 312, 312, 1935),
    _chip("A100", f"{_A100} (board not named: 40GB PCIe to 80GB SXM)", 19.5, 156, 312, 312,
          (1555, 2039)),
    _chip("L40S", "NVIDIA L40S GPU datasheet", 91.6, 183, 362.05, 362.05, 864),
    _chip("L40", "NVIDIA L40 GPU datasheet", 90.5, 90.5, 181.05, 181.05, 864),
    _chip("L4", "NVIDIA L4 Tensor Core GPU datasheet", 30.3, 60, 121, 121, 300),
    _chip("A10", "NVIDIA A10 Tensor Core GPU datasheet", 31.2, 62.5, 125, 125, 600),
    _chip("T4", "NVIDIA T4 Tensor Core GPU datasheet (no bf16 tensor cores; fp16 is the mixed-"
          "precision rate)", 8.1, None, None, 65, (300, 320)),
    _chip("V100 SXM2", "NVIDIA V100 Tensor Core GPU datasheet (SXM2; no bf16 tensor cores)",
          15.7, None, None, 125, 900),
    _chip("V100 PCIe", "NVIDIA V100 Tensor Core GPU datasheet (PCIe; no bf16 tensor cores)",
          14, None, None, 112, 900),
    _chip("RTX 4090", "NVIDIA Ada Lovelace GPU architecture whitepaper (GeForce RTX 4090; half "
          "precision with fp32 accumulation, as torch's products accumulate)", 82.6, 82.6, 165.2,
          165.2, 1008),
    _chip("RTX 3090", "NVIDIA Ampere GA102 GPU architecture whitepaper (GeForce RTX 3090; half "
          "precision with fp32 accumulation, as torch's products accumulate)", 35.6, 35.6, 71, 71,
          936),
    _chip("MI300X", "AMD Instinct MI300X accelerator datasheet (fp32 matrix rate)", 163.4, 653.7,
          1307.4, 1307.4, 5300, ("tf32",), _ROCM_TF32),
    _chip("MI250X", "AMD Instinct MI250X accelerator datasheet, per GCD (torch sees the module's two "
          "GCDs as two devices, each with half its figures; fp32 matrix rate; an MI250, named "
          "alike by ROCm, is about 5% slower)", 47.9, None, 191.5, 191.5, 1638.4),
    *(_apple(chip) for chip in APPLE_CHIPS),
)}

_APPLE_CHIP = re.compile(r"\b(M\d+)(?:\s+(Pro|Max|Ultra))?\b", re.IGNORECASE)
_MIG_PROFILE = re.compile(r"^(\d)g\.\d+gb$")
#: word -> the chip it names alone (NVIDIA boards whose variants are named below, AMD, GeForce).
_PLAIN = {"gh200": "GH200", "b200": "B200", "l40s": "L40S", "l40": "L40", "l4": "L4", "a10": "A10",
          "a10g": "A10G", "t4": "T4", "v100s": "V100S", "mi300x": "MI300X", "mi300a": "MI300A",
          "mi250x": "MI250X", "mi250": "MI250X", "mi210": "MI210"}
#: GeForce words that make another product of the same number (not in the table).
_GEFORCE_VARIANTS = {"d": "D", "ti": "Ti", "laptop": "Laptop", "super": "Super"}


def _words(name: str) -> list[str]:
    # Keeps a MIG profile ("1g.10gb") in one word; "A100-SXM4-80GB" is three.
    return re.findall(r"[a-z0-9]+(?:\.[a-z0-9]+)*", name.lower())


def _nvidia_board(words: list[str]) -> str | None:
    if "h100" in words or "h200" in words:
        chip = "H100" if "h100" in words else "H200"
        # torch names an SXM board "NVIDIA H100 80GB HBM3" / "NVIDIA H200"; PCIe and NVL say so.
        form = "NVL" if "nvl" in words else "PCIe" if "pcie" in words else "SXM"
        return f"{chip} {form}"
    if "a100" in words:
        form = "PCIe" if "pcie" in words else "SXM" if any(w.startswith("sxm") for w in words) else ""
        memory = next((w.upper() for w in words if w in ("40gb", "80gb")), "")
        return f"A100 {form} {memory}" if form and memory else "A100"
    if "v100" in words:
        return "V100 PCIe" if "pcie" in words else "V100 SXM2"
    for number in ("4090", "3090"):
        if number in words and "rtx" in words:
            variant = [label for word, label in _GEFORCE_VARIANTS.items() if word in words]
            return " ".join([f"RTX {number}", *variant])
    return next((_PLAIN[word] for word in words if word in _PLAIN), None)


def chip_name(device_name: str) -> str | None:
    """The whole chip a device name names ("M1 Ultra", "H100 SXM", "A100 PCIe 80GB"), whether or
    not the table knows it; None when the name names no chip family accelbench recognises."""
    words = _words(device_name)
    if "apple" in words:
        match = _APPLE_CHIP.search(device_name)
        if match:
            return match.group(1).upper() + (f" {match.group(2).title()}" if match.group(2) else "")
        return None
    return _nvidia_board(words)


def mig_share(device_name: str) -> float | None:
    """A MIG slice's share of its GPU's compute from its profile ("MIG 3g.40gb" -> 3/7); None
    for a whole GPU."""
    words = _words(device_name)
    if "mig" not in words:
        return None
    profile = next((m for m in map(_MIG_PROFILE.match, words) if m), None)
    return int(profile.group(1)) / 7 if profile else None


def vendor_figures(device_name: str) -> VendorFigures | None:
    """The published figures of the chip ``device_name`` names (a MIG slice's share of them);
    None for a chip not in the table, or a MIG slice whose profile is not in its name."""
    chip = chip_name(device_name)
    figures = VENDOR_FIGURES.get(chip) if chip else None
    if figures is None or "mig" not in _words(device_name):
        return figures
    share = mig_share(device_name)
    if share is None:
        return None
    return replace(figures, chip=f"{figures.chip} MIG slice ({round(share * 7)}g of 7)",
                   source=f"{figures.source}; {round(share * 7)}/7 of its compute figures",
                   matmul_flops={k: v * share for k, v in figures.matmul_flops.items()},
                   slice_share=share)


#: The smallest bf16 : fp32 matmul ratio any tensor-core card's datasheet gives is 2 (GeForce RTX
#: 30 and 40: half precision with fp32 accumulation at half the tensor rate); a measurement reaches
#: a little less of the tensor rate than of the fp32 rate, so 1.5 is required of a card the table
#: does not know.
MIN_TENSOR_CORE_RATIO = 1.5


def min_half_to_fp32(info: dict[str, Any]) -> tuple[float, str, bool] | None:
    """How many times the fp32 matmul rate a bf16 product must reach on this accelerator, why,
    and whether that comes from the datasheet; None where nothing says the device multiplies bf16
    faster than fp32. From its datasheet where both rates are published (half that ratio:
    kernels reach less of the tensor rate; at least MIN_TENSOR_CORE_RATIO), else from the
    architecture: an NVIDIA GPU of compute capability 8.0 or later (Ampere) has bf16 tensor
    cores."""
    figures = vendor_figures(str(info.get("name", "")))
    ratio = figures.half_to_fp32() if figures is not None else None
    if figures is not None and ratio is not None and ratio >= 2:
        return max(MIN_TENSOR_CORE_RATIO, ratio / 2), \
            f"half the {figures.chip}'s published {ratio:.1f}x ({figures.source})", True
    capability = str(info.get("compute_capability") or "")
    nvidia = bool(info.get("cuda_version")) and not info.get("hip_version")
    try:
        major = int(capability.split(".")[0])
    except ValueError:
        return None
    if nvidia and major >= 8:
        return MIN_TENSOR_CORE_RATIO, (f"an NVIDIA GPU of compute capability {capability} has bf16 "
                                       "tensor cores (every such datasheet gives at least 2x)"), False
    return None
