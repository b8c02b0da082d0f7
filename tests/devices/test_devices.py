"""Device availability reasons and --device selection, with fakes for hardware we do not have."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeAsyncAdapter, fake_torch

from accelbench.devices.cpu import CpuAdapter
from accelbench.devices.cuda import CudaAdapter
from accelbench.devices.generic import GenericAcceleratorAdapter
from accelbench.devices.mps import MacFacts, MpsAdapter
from accelbench.devices.registry import DeviceSet, discover
from accelbench.devices.xpu import XpuAdapter
from accelbench.errors import DeviceUnavailableError, UsageError


def test_cpu_only_torch_build_is_named() -> None:
    status = CudaAdapter(fake_torch(cuda=None)).availability()
    assert not status.available and not status.built
    assert "CPU-only build" in status.reason and "CUDA build" in status.fix


def test_cuda_build_without_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    status = CudaAdapter(fake_torch(cuda="12.6"), driver_file=tmp_path / "none").availability()
    assert "CUDA 12.6" in status.reason and "no NVIDIA driver" in status.reason
    assert "driver" in status.fix


def test_old_driver_warning_from_torch_is_repeated(tmp_path: Path) -> None:
    torch = fake_torch(cuda="12.6", cuda_warning="The NVIDIA driver on your system is too old "
                       "(found version 11040).")
    status = CudaAdapter(torch, driver_file=tmp_path).availability()
    assert "too old" in status.reason and "update the NVIDIA driver" in status.fix


def test_hidden_gpus_are_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    status = CudaAdapter(fake_torch(cuda="12.6"), driver_file=tmp_path).availability()
    assert "CUDA_VISIBLE_DEVICES" in status.reason


def test_rocm_build_is_reported_as_rocm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    status = CudaAdapter(fake_torch(hip="6.2"), driver_file=tmp_path / "none").availability()
    assert "ROCm 6.2" in status.reason


def test_available_cuda_describes_itself() -> None:
    adapter = CudaAdapter(fake_torch(cuda="12.6", cuda_available=True, cuda_count=2))
    status = adapter.availability()
    assert status.available and status.count == 2
    info = adapter.info(1)
    assert info["name"] == "Fake GPU 80GB" and info["compute_capability"] == "9.0"
    # Free memory comes from NVML, never from torch.cuda.mem_get_info (a CUDA context): with no
    # nvidia-ml-py the description says so instead (tests/devices/test_fidelity_devices.py has NVML).
    assert "memory_free_bytes" not in info or "memory_free_note" not in info


MAC_ARM = MacFacts("Darwin", "arm64", "14.5", rosetta=False)


@pytest.mark.parametrize(
    "facts,built,available,expected",
    [
        (MacFacts("Linux", "x86_64", "", False), False, False, "only on macOS"),
        (MacFacts("Darwin", "x86_64", "14.5", True), True, False, "Rosetta"),
        (MacFacts("Darwin", "arm64", "12.1", False), True, False, "too old"),
        (MAC_ARM, False, False, "no MPS support"),
        (MAC_ARM, True, False, "no Metal GPU"),
    ],
)
def test_mps_reasons(facts: MacFacts, built: bool, available: bool, expected: str) -> None:
    status = MpsAdapter(fake_torch(mps_built=built, mps_available=available), facts).availability()
    assert not status.available and expected in status.reason and status.fix


def test_mps_available_and_peak_is_sampled_at_syncs() -> None:
    allocated = [100]
    torch = fake_torch(mps_built=True, mps_available=True)
    torch.mps = type("M", (), {"synchronize": staticmethod(lambda: None),
                               "current_allocated_memory": staticmethod(lambda: allocated[0])})
    adapter = MpsAdapter(torch, MAC_ARM)
    assert adapter.availability().available
    adapter.reset_peak_memory(0)
    allocated[0] = 500
    adapter.synchronize(0)
    allocated[0] = 200
    assert adapter.peak_memory_bytes(0) == 500
    # This torch keeps no MPS peak: the sampled figure is labelled a lower bound.
    assert adapter.memory_is_lower_bound and "lower bound" in adapter.memory_source


def test_xpu_reasons() -> None:
    assert "no XPU" in XpuAdapter(fake_torch(xpu_compiled=False)).availability().reason
    missing = XpuAdapter(fake_torch(xpu_compiled=True)).availability()
    assert not missing.available and "Intel GPU" in missing.reason
    assert XpuAdapter(fake_torch(xpu_compiled=True, xpu_available=True,
                                 xpu_count=1)).availability().available


def test_other_accelerators_come_through_torch_accelerator() -> None:
    torch = fake_torch(accelerator="hpu", accelerator_count=1)
    kinds = [a.kind for a in discover(torch)]
    assert kinds[-1] == "hpu"
    assert GenericAcceleratorAdapter("hpu", torch).availability().available


def fake_set(cuda_count: int = 2) -> DeviceSet:
    cuda = CudaAdapter(fake_torch(cuda="12.6", cuda_available=cuda_count > 0,
                                  cuda_count=cuda_count))
    mps = MpsAdapter(fake_torch(), MacFacts("Linux", "x86_64", "", False))
    return DeviceSet([CpuAdapter(), cuda, mps, FakeAsyncAdapter()])


def test_auto_picks_the_best_accelerator_or_cpu() -> None:
    assert [d.name for d in fake_set(2).select("auto")] == ["cuda:0"]
    no_gpu = DeviceSet([CpuAdapter(), CudaAdapter(fake_torch(cuda=None))])
    assert [d.name for d in no_gpu.select("auto")] == ["cpu"]


def test_all_lists_every_device_including_cpu() -> None:
    assert [d.name for d in fake_set(2).select("all")] == ["cpu", "cuda:0", "cuda:1", "fake:0",
                                                           "fake:1"]


def test_comma_lists_and_indices_without_duplicates() -> None:
    assert [d.name for d in fake_set().select("cpu, cuda:1,cuda:1,CUDA")] == ["cpu", "cuda:1",
                                                                           "cuda:0"]


def test_index_out_of_range_lists_what_exists() -> None:
    with pytest.raises(DeviceUnavailableError, match=r"has 2 cuda device\(s\) \(cuda:0, cuda:1\)"):
        fake_set().select("cuda:2")


def test_unavailable_device_repeats_the_doctors_reason() -> None:
    with pytest.raises(DeviceUnavailableError, match="only on macOS.*fix: run on a Mac"):
        fake_set().select("mps")


@pytest.mark.parametrize("spec", ["tpu", "cuda:x", "cpu,,cuda", "", "cpu:1"])
def test_malformed_device_specs(spec: str) -> None:
    with pytest.raises(UsageError):
        fake_set().select(spec)


def test_cpu_peak_memory_sees_a_large_allocation() -> None:
    import torch

    cpu = CpuAdapter()
    cpu.reset_peak_memory(0)
    before = cpu.peak_memory_bytes(0)
    block = torch.ones(64 * 2**20)  # 256 MiB
    after = cpu.peak_memory_bytes(0)
    del block
    assert before is not None and after is not None
    assert after - before >= 200 * 2**20
