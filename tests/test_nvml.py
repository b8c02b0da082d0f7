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
from accelbench.measure.energy_nvml import NvmlSource

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
    tests = Path(__file__).parent
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
