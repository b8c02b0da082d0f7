"""selftest's vendor table matches whole chip names (issue 19, item 4): an M1 Ultra, an M2 Max or an
M3 Pro is judged against its own published figures, never a smaller sibling's; a chip the table
does not know gets physical bounds; NVIDIA's boards still match."""

from __future__ import annotations

import pytest
from fakes import FakeQueueAdapter

from accelbench.devices import Device
from accelbench.devices.datasheets import chip_name, vendor_figures
from accelbench.measure.ceilings.roofline import Roofline
from accelbench.selftest import ceilings
from accelbench.selftest.result import BOUNDS, FAIL, PASS


class NamedAdapter(FakeQueueAdapter):
    def __init__(self, name: str, **info) -> None:
        super().__init__()
        self.name, self.extra = name, info

    def info(self, index: int) -> dict:
        return {"name": self.name, **self.extra}


def _mac(chip: str) -> Device:
    """An Apple GPU as accelbench's MPS adapter names it (from the CPU brand string, "Apple M1")."""
    return Device(NamedAdapter(f"Apple {chip} GPU (MPS)"), "mps")


def _judge(device: Device, fp32: float, bandwidth: float) -> dict[str, str]:
    figures = Roofline(device.name, "x", {"fp32": fp32, "tf32": fp32, "fp16": fp32, "bf16": fp32 / 4},
                       bandwidth, 1e-5, {}, {}, "2026-01-01T00:00:00+00:00",
                       method={"bandwidth_buffer_bytes": 512 * 2**20})
    return {r.name.split(" within")[0]: r.status for r in ceilings.judge_roofline(device, figures)}


def _sound(results: dict[str, str]) -> bool:
    """No failure; fp32 and the bandwidth pass against Apple's figures, and the half precisions,
    bounded above only (Apple publishes no half-precision rate), are within bounds only."""
    return (results["matmul fp32 FLOP/s"], results["memory bandwidth"]) == (PASS, PASS) \
        and results["matmul bf16 FLOP/s"] == results["matmul fp16 FLOP/s"] == BOUNDS \
        and FAIL not in results.values()


# Apple's published GPU FP32 TFLOPS and memory GB/s (shared/reference/published-results.md)
@pytest.mark.parametrize(("chip", "tflops", "gb_s"), [
    ("M1", 2.6, 68), ("M1 Pro", 5.2, 200), ("M1 Max", 10.4, 400), ("M1 Ultra", 21, 800),
    ("M2", 3.6, 100), ("M2 Pro", 6.8, 200), ("M2 Max", 13.6, 400), ("M2 Ultra", 27.2, 800),
])
def test_each_apple_chip_gets_its_own_published_figures(chip: str, tflops: float, gb_s: float) -> None:
    figures = vendor_figures(f"Apple {chip} GPU (MPS)")
    assert figures is not None and figures.chip == chip
    assert figures.matmul_flops["fp32"] == pytest.approx(tflops * 1e12)
    assert figures.bandwidth_bytes_per_s == pytest.approx((gb_s * 1e9, gb_s * 1e9))
    # a sound reading of this chip (80% of its figures) passes
    results = _judge(_mac(chip), 0.8 * tflops * 1e12, 0.8 * gb_s * 1e9)
    assert _sound(results), results


def test_big_chips_are_not_failed_against_their_small_siblings() -> None:
    # An M1 Ultra reading 17 TFLOPS and 700 GB/s was judged against the M1's 2.6 TFLOPS and
    # 68 GB/s (first substring hit), 1.1x of which it "exceeded": a correct Mac failed.
    assert _sound(_judge(_mac("M1 Ultra"), 17e12, 700e9))
    assert _sound(_judge(_mac("M2 Max"), 11e12, 350e9))
    # ... and the bounds still bite: beyond an M2 Max's own figures is impossible
    too_fast = _judge(_mac("M2 Max"), 20e12, 600e9)
    assert too_fast["matmul fp32 FLOP/s"] == FAIL and too_fast["memory bandwidth"] == FAIL


def test_a_chip_with_published_bandwidth_only_gets_physical_flops_bounds() -> None:
    m3_pro = _mac("M3 Pro")
    info = m3_pro.info()
    assert ceilings.bandwidth_bounds(m3_pro, info).high == pytest.approx(1.1 * 150e9)
    assert ceilings.bandwidth_bounds(m3_pro, info).low == pytest.approx(0.2 * 150e9)
    flops = ceilings.flops_bounds(m3_pro, info, "fp32")
    assert (flops.low, flops.high) == (ceilings.ACCELERATOR_MIN_FLOPS, ceilings.ACCELERATOR_MAX_FLOPS)
    assert "no published fp32 figure for the M3 Pro" in flops.basis
    # a chip sold with two memory configurations: both pass
    m3_max = _mac("M3 Max")
    bounds = ceilings.bandwidth_bounds(m3_max, m3_max.info())
    assert bounds.low == pytest.approx(0.2 * 300e9) and bounds.high == pytest.approx(1.1 * 400e9)


@pytest.mark.parametrize("name", ["Apple M5 GPU (MPS)", "Apple M4 Ultra GPU (MPS)",
                                  "NVIDIA RTX A1000", "NVIDIA GB200", "Intel(R) Arc(TM) A770"])
def test_an_unknown_chip_gets_physical_bounds(name: str) -> None:
    device = Device(NamedAdapter(name), "fake")
    assert vendor_figures(name) is None
    flops = ceilings.flops_bounds(device, device.info(), "fp32")
    assert (flops.low, flops.high) == (ceilings.ACCELERATOR_MIN_FLOPS, ceilings.ACCELERATOR_MAX_FLOPS)
    assert flops.basis == "unknown accelerator: physical bounds"
    assert ceilings.bandwidth_bounds(device, device.info()).high == ceilings.ACCELERATOR_MAX_BANDWIDTH


@pytest.mark.parametrize(("name", "chip", "fp32"), [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 67e12), ("NVIDIA H100 PCIe", "H100 PCIe", 51.2e12),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB", 19.5e12),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB", 19.5e12),
])
def test_nvidia_names_still_match(name: str, chip: str, fp32: float) -> None:
    assert chip_name(name) == chip
    figures = vendor_figures(name)
    assert figures is not None and figures.matmul_flops["fp32"] == fp32
    device = Device(NamedAdapter(name), "cuda")
    assert ceilings.flops_bounds(device, device.info(), "fp32").high == pytest.approx(1.1 * fp32)


def test_a_macs_cpu_is_not_held_to_its_gpus_figures() -> None:
    # The CPU of a Mac is named by its brand string ("Apple M2 Max"); the published figures are
    # the GPU's, so the CPU keeps its physical bounds.
    cpu = Device(NamedAdapter("Apple M2 Max", logical_cores=12), "cpu")
    bounds = ceilings.flops_bounds(cpu, cpu.info(), "bf16")
    assert "12 cores" in bounds.basis and bounds.low == 12 * ceilings.CPU_MIN_FLOPS_PER_CORE["bf16"]
    assert "12 cores" in ceilings.bandwidth_bounds(cpu, cpu.info()).basis


# --- the MPS adapter's own name (issue 19 loose end: "Apple Apple M1 Pro GPU (MPS)") -----------------
def _mps_adapter_on(monkeypatch: pytest.MonkeyPatch, brand: str, facts: object = None) -> Device:
    """accelbench's MPS adapter on a Mac whose ``sysctl machdep.cpu.brand_string`` says ``brand``."""
    from types import SimpleNamespace

    from fakes import MAC_FACTS_ARM, fake_torch

    from accelbench.devices import cpuinfo
    from accelbench.devices.mps import MpsAdapter

    monkeypatch.setattr(cpuinfo, "cpu_model", lambda: brand)
    torch = fake_torch(mps_built=True, mps_available=True)
    torch.mps = SimpleNamespace(recommended_max_memory=lambda: 48 * 2**30)
    return Device(MpsAdapter(torch, facts or MAC_FACTS_ARM), "mps")


@pytest.mark.parametrize(("brand", "chip"), [("Apple M1", "M1"), ("Apple M1 Pro", "M1 Pro"),
                                             ("Apple M1 Ultra", "M1 Ultra"), ("Apple M2 Max", "M2 Max")])
def test_the_mps_adapter_names_the_chip_once_and_selftest_finds_it(monkeypatch, brand: str,
                                                                    chip: str) -> None:
    device = _mps_adapter_on(monkeypatch, brand)
    info = device.info()
    assert info["name"] == f"{brand} GPU (MPS)"  # was "Apple Apple M1 Pro GPU (MPS)"
    figures = vendor_figures(info["name"])
    assert figures is not None and figures.chip == chip
    published = figures.matmul_flops["fp32"], figures.bandwidth_bytes_per_s[0]
    assert _sound(_judge(device, 0.8 * published[0], 0.8 * published[1]))


def test_an_older_results_doubled_name_still_finds_its_chip() -> None:
    assert chip_name("Apple Apple M1 Ultra GPU (MPS)") == "M1 Ultra"


def test_a_mac_whose_brand_string_names_no_apple_chip_is_not_named_after_one(monkeypatch) -> None:
    from fakes import MAC_FACTS_ARM

    from accelbench.devices.mps import MacFacts

    # sysctl unreadable on Apple silicon: cpu_model falls back to platform.processor(), "arm"
    unknown = _mps_adapter_on(monkeypatch, "arm", MAC_FACTS_ARM).info()["name"]
    assert unknown == "Apple silicon GPU (MPS)" and vendor_figures(unknown) is None
    intel = _mps_adapter_on(monkeypatch, "Intel(R) Core(TM) i9-9980HK CPU @ 2.40GHz",
                            MacFacts("Darwin", "x86_64", "13.6", rosetta=False)).info()["name"]
    assert intel == "Metal GPU (MPS) on a Mac with Intel(R) Core(TM) i9-9980HK CPU @ 2.40GHz"
    assert chip_name(intel) is None
