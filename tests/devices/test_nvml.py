"""NVML through accelbench.devices.nvml: one session per process (issue 19, item 13) and MIG
slices mapped to NVML's names for them (item 15), against FakeNvml, which counts
nvmlInit/nvmlShutdown and names slices as NVML does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes import FakeNvml, fake_cuda_torch, fake_gpu_uuid

from accelbench.devices import nvml as nvml_module
from accelbench.devices.cuda import CudaAdapter
from accelbench.measure.trackers.energy_nvml import NvmlSource

GPU0, GPU1 = f"GPU-{fake_gpu_uuid(0)}", f"GPU-{fake_gpu_uuid(1)}"
#: The MIG UUID CUDA gives a slice (torch prints it bare, like a GPU's).
SLICE = "5d1ef6e4-0c3a-5f7e-9b2d-7a1c3e9f0b11"


def install(monkeypatch: pytest.MonkeyPatch, nvml: FakeNvml) -> FakeNvml:
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml


def torch_with_uuids(*uuids: str) -> Any:
    """A CUDA torch whose devices report these bare UUIDs (a MIG slice's as CUDA gives it)."""
    fake = fake_cuda_torch(count=len(uuids))
    described = fake.cuda.get_device_properties
    fake.cuda.get_device_properties = lambda index: SimpleNamespace(
        **{**vars(described(index)), "uuid": uuids[index]})
    return fake


# --- item 13: one NVML session per process ------------------------------------------------------
def test_nvml_is_initialised_once_however_often_gpus_are_described(monkeypatch) -> None:
    nvml = install(monkeypatch, FakeNvml([GPU1, GPU0]))
    adapter = CudaAdapter(fake_cuda_torch(count=2))
    for _ in range(3):
        for index in (0, 1):
            assert "memory_free_bytes" in adapter.info(index)
            assert "error" not in adapter.sensors(index)
    source = NvmlSource(0, torch_module=fake_cuda_torch(count=2))
    assert source.available() == (True, "")
    source.start()
    source.stop()
    assert (nvml.inits, nvml.shutdowns) == (1, 0)


def test_a_failed_init_is_a_reason_and_a_later_call_tries_again(monkeypatch) -> None:
    nvml = install(monkeypatch, FakeNvml([GPU0]))
    calls = {"n": 0}

    def flaky_init() -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise nvml.NVMLError("Driver Not Loaded")

    monkeypatch.setattr(nvml, "nvmlInit", flaky_init)
    adapter = CudaAdapter(fake_cuda_torch(count=1))
    assert "Driver Not Loaded" in adapter.sensors(0)["error"]
    assert adapter.sensors(0) == {"gpu_temperature_c": 40, "gpu_sm_clock_mhz": 1000}
    assert calls["n"] == 2


def test_the_session_is_shut_down_once_when_the_process_exits(tmp_path: Path) -> None:
    """A real child process: many descriptions, one init, one shutdown (at exit, by atexit)."""
    tests = Path(__file__).parents[1]
    script = textwrap.dedent(f"""
        import atexit, sys
        from fakes import FakeNvml, fake_cuda_torch
        nvml = FakeNvml(["GPU-{fake_gpu_uuid(0)}"])
        sys.modules["pynvml"] = nvml
        # Registered before NVML is first used, so it runs after accelbench's own exit handler.
        atexit.register(lambda: print("counts", nvml.inits, nvml.shutdowns))
        from accelbench.devices.cuda import CudaAdapter
        adapter = CudaAdapter(fake_cuda_torch(count=1))
        for _ in range(5):
            adapter.info(0)
            adapter.sensors(0)
        print("before exit", nvml.inits, nvml.shutdowns)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tests), str(tests.parent / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=120, check=True)
    assert "before exit 1 0" in done.stdout, done.stdout + done.stderr
    assert "counts 1 1" in done.stdout, done.stdout + done.stderr


# --- item 15: MIG slices ------------------------------------------------------------------------
def test_a_mig_slice_is_found_under_nvmls_mig_name(monkeypatch) -> None:
    """torch prints a slice's UUID bare; NVML (R470+) names it MIG-<uuid>, never GPU-<uuid>."""
    nvml = install(monkeypatch, FakeNvml([GPU0], mig={f"MIG-{SLICE}": GPU0}))
    adapter = CudaAdapter(torch_with_uuids(SLICE))
    info = adapter.info(0)
    assert info["memory_free_bytes"] == 6 * 2**30, info  # the slice's own memory, not the GPU's
    # Temperature and SM clock are the whole GPU's, read through the slice's parent handle.
    assert adapter.sensors(0) == {"gpu_temperature_c": 40, "gpu_sm_clock_mhz": 1000}
    assert nvml.handles_used[-1] == GPU0
    device = nvml_module.nvml_target(nvml, 0, torch_with_uuids(SLICE))
    assert device.mig and device.name == f"MIG-{SLICE}" and device.parent == GPU0


def test_a_mig_slice_has_no_energy_of_its_own_and_says_why(monkeypatch) -> None:
    install(monkeypatch, FakeNvml([GPU0], mig={f"MIG-{SLICE}": GPU0}))
    ok, reason = NvmlSource(0, torch_module=torch_with_uuids(SLICE)).available()
    assert not ok
    assert "MIG slice" in reason and "whole GPU" in reason and f"MIG-{SLICE}" in reason


def test_an_old_drivers_mig_name_is_a_stated_reason_not_a_silent_miss(monkeypatch) -> None:
    """Before R470 NVML named slices MIG-GPU-<gpu uuid>/<gi>/<ci>: not derivable from the slice's
    UUID, so the reason says so."""
    install(monkeypatch, FakeNvml([GPU0], mig={f"MIG-{GPU0}/1/0": GPU0}))
    adapter = CudaAdapter(torch_with_uuids(SLICE))
    error = adapter.sensors(0)["error"]
    assert f"GPU-{SLICE}" in error and f"MIG-{SLICE}" in error and "R470" in error
    assert "R470" in adapter.info(0)["memory_free_note"]
    ok, reason = NvmlSource(0, torch_module=torch_with_uuids(SLICE)).available()
    assert not ok and "R470" in reason


def test_a_whole_gpu_is_still_found_as_gpu_first(monkeypatch) -> None:
    nvml = install(monkeypatch, FakeNvml([GPU1, GPU0], mig={f"MIG-{SLICE}": GPU1}))
    adapter = CudaAdapter(torch_with_uuids(fake_gpu_uuid(0), SLICE))
    assert adapter.sensors(0) == {"gpu_temperature_c": 41, "gpu_sm_clock_mhz": 1001}
    assert nvml.handles_used[-1] == GPU0
    # cuda:1 is a slice of GPU1 (NVML's first GPU): the board's sensors are GPU1's.
    assert adapter.sensors(1) == {"gpu_temperature_c": 40, "gpu_sm_clock_mhz": 1000}
    assert nvml.handles_used[-1] == GPU1
    assert nvml_module.nvml_names(fake_gpu_uuid(0)) == (GPU0, f"MIG-{fake_gpu_uuid(0)}")


def test_cuda_visible_devices_naming_a_slice_maps_without_uuids(monkeypatch) -> None:
    nvml = install(monkeypatch, FakeNvml([GPU0], mig={f"MIG-{SLICE}": GPU0}))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"MIG-{SLICE}")
    no_uuid = SimpleNamespace(cuda=SimpleNamespace(get_device_properties=lambda index: 1 / 0))
    device = nvml_module.nvml_target(nvml, 0, no_uuid)
    assert device.mig and device.handle == f"MIG-{SLICE}" and device.board == GPU0


# --- issue 26, item 21: a MIG slice is never taken for its whole GPU -----------------------------
class MigModeNvml(FakeNvml):
    """FakeNvml whose GPUs in ``mig_on`` are in MIG mode (nvmlDeviceGetMigMode's current is 1),
    listing their slices (``mig``) by place as NVML does (an empty place answers NOT_FOUND)."""

    def __init__(self, uuids: list[str], mig: dict[str, str], mig_on: set[str]) -> None:
        super().__init__(uuids, mig=mig)
        self.mig_on = mig_on

    def nvmlDeviceGetMigMode(self, handle: str) -> list[int]:  # noqa: N802
        if handle in self.mig:
            raise self.NVMLError("Invalid Argument")
        return [1, 1] if handle in self.mig_on else [0, 0]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: str) -> int:  # noqa: N802
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: str, place: int) -> str:  # noqa: N802
        slices = [name for name, gpu in self.mig.items() if gpu == handle]
        if place >= len(slices):
            raise self.NVMLError("Not Found")
        return slices[place]


SLICE2 = "6e2f07f5-1d4b-6a8f-0c3e-8b2d4f0a1c22"


def test_a_slice_whose_runtime_reports_its_gpus_uuid_is_found_as_the_slice(monkeypatch) -> None:
    """A runtime before cuDeviceGetUuid_v2 reports a slice's parent UUID: GPU-<uuid> then names
    the whole GPU. NVML says MIG mode is on there, so the device is its (only) slice: the slice's
    memory, and no energy (the board's counter counts the other slices too)."""
    nvml = install(monkeypatch, MigModeNvml([GPU0], mig={f"MIG-{SLICE}": GPU0}, mig_on={GPU0}))
    parents_uuid = torch_with_uuids(fake_gpu_uuid(0))
    device = nvml_module.nvml_target(nvml, 0, parents_uuid)
    assert device.mig and device.handle == f"MIG-{SLICE}" and device.board == GPU0
    adapter = CudaAdapter(parents_uuid)
    assert adapter.info(0)["memory_free_bytes"] == 6 * 2**30  # the slice's, not the GPU's 10 GiB
    assert adapter.sensors(0)["gpu_temperature_c"] == 40  # the board's, through the parent
    ok, reason = NvmlSource(0, torch_module=parents_uuid).available()
    assert not ok and "MIG slice" in reason


def test_cuda_visible_devices_naming_a_slice_wins_over_torchs_uuid(monkeypatch) -> None:
    nvml = install(monkeypatch, MigModeNvml([GPU0], mig={f"MIG-{SLICE}": GPU0, f"MIG-{SLICE2}": GPU0},
                                            mig_on={GPU0}))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"MIG-{SLICE2}")
    device = nvml_module.nvml_target(nvml, 0, torch_with_uuids(fake_gpu_uuid(0)))
    assert device.mig and device.handle == f"MIG-{SLICE2}" and device.board == GPU0


def test_a_gpu_in_mig_mode_with_several_slices_says_which_is_unknown(monkeypatch) -> None:
    install(monkeypatch, MigModeNvml([GPU0], mig={f"MIG-{SLICE}": GPU0, f"MIG-{SLICE2}": GPU0},
                                     mig_on={GPU0}))
    adapter = CudaAdapter(torch_with_uuids(fake_gpu_uuid(0)))
    note = adapter.info(0)["memory_free_note"]
    assert "MIG slice" in note and "2 slices" in note and "CUDA_VISIBLE_DEVICES" in note
    assert "memory_free_bytes" not in adapter.info(0)  # never the whole GPU's free memory
    assert adapter.sensors(0)["gpu_sm_clock_mhz"] == 1000  # the board's sensors still read


def test_a_gpu_not_in_mig_mode_is_the_whole_gpu(monkeypatch) -> None:
    nvml = install(monkeypatch, MigModeNvml([GPU0], mig={}, mig_on=set()))
    device = nvml_module.nvml_target(nvml, 0, torch_with_uuids(fake_gpu_uuid(0)))
    assert not device.mig and device.handle == GPU0


# --- issue 26, item 20: clock-event reasons and memory temperature --------------------------------
class ThrottlingNvml(FakeNvml):
    """FakeNvml that answers the clock-event reasons (``event_call``: the name the installed
    nvidia-ml-py has) with ``mask``, and the memory temperature field with ``memory_c``."""

    def __init__(self, mask: int, memory_c: int | None, event_call: str) -> None:
        super().__init__([GPU0])
        self.mask, self.memory_c = mask, memory_c
        setattr(self, event_call, lambda handle: self.mask)

    def nvmlDeviceGetFieldValues(self, handle: str, ids: list[int]) -> list[Any]:  # noqa: N802
        assert ids == [nvml_module.FIELD_MEMORY_TEMPERATURE]
        if self.memory_c is None:
            return [SimpleNamespace(nvmlReturn=3, valueType=1, value=SimpleNamespace(uiVal=0))]
        return [SimpleNamespace(nvmlReturn=0, valueType=1, value=SimpleNamespace(uiVal=self.memory_c))]


@pytest.mark.parametrize("call", ["nvmlDeviceGetCurrentClocksEventReasons",
                                  "nvmlDeviceGetCurrentClocksThrottleReasons"])
def test_the_clock_event_reasons_and_memory_temperature_are_read(monkeypatch, call: str) -> None:
    install(monkeypatch, ThrottlingNvml(0x4 | 0x40, 86, call))
    readings = CudaAdapter(fake_cuda_torch(count=1)).sensors(0)
    assert readings["gpu_clock_events"] == ["software power cap", "hardware thermal slowdown"]
    assert readings["gpu_memory_temperature_c"] == 86.0


def test_a_gpu_without_memory_temperature_leaves_it_out(monkeypatch) -> None:
    install(monkeypatch, ThrottlingNvml(0, None, "nvmlDeviceGetCurrentClocksEventReasons"))
    readings = CudaAdapter(fake_cuda_torch(count=1)).sensors(0)
    assert readings["gpu_clock_events"] == [] and "gpu_memory_temperature_c" not in readings
