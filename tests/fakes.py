"""Fake hardware for the device paths this machine cannot run (CUDA, MPS, XPU)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

from accelbench.devices.base import Availability, DeviceAdapter


def fake_torch(cuda: str | None = None, hip: str | None = None, cuda_available: bool = False,
               cuda_count: int = 0, cuda_warning: str = "", mps_built: bool = False,
               mps_available: bool = False, xpu_compiled: bool = False,
               xpu_available: bool = False, xpu_count: int = 0,
               accelerator: str | None = None, accelerator_count: int = 0) -> Any:
    def cuda_is_available() -> bool:
        if cuda_warning:
            warnings.warn(cuda_warning, UserWarning, stacklevel=1)
        return cuda_available

    props = SimpleNamespace(name="Fake GPU 80GB", total_memory=80 * 2**30, major=9, minor=0,
                            multi_processor_count=132)
    return SimpleNamespace(
        version=SimpleNamespace(cuda=cuda, hip=hip),
        cuda=SimpleNamespace(is_available=cuda_is_available, device_count=lambda: cuda_count,
                             get_device_properties=lambda i: props,
                             mem_get_info=lambda i: (70 * 2**30, 80 * 2**30)),
        backends=SimpleNamespace(mps=SimpleNamespace(is_built=lambda: mps_built,
                                                     is_available=lambda: mps_available)),
        xpu=SimpleNamespace(_is_compiled=lambda: xpu_compiled, is_available=lambda: xpu_available,
                            device_count=lambda: xpu_count),
        accelerator=SimpleNamespace(
            current_accelerator=lambda: SimpleNamespace(type=accelerator) if accelerator else None,
            device_count=lambda: accelerator_count,
        ),
    )


class FakeAsyncAdapter(DeviceAdapter):
    """An 'accelerator' whose synchronisations are counted, for timing-loop tests."""

    kind = "fake"
    is_async = True

    def __init__(self) -> None:
        self.syncs = 0
        self.peak = 0

    def availability(self) -> Availability:
        return Availability("fake", True, count=2)

    def synchronize(self, index: int) -> None:
        self.syncs += 1

    def reset_peak_memory(self, index: int) -> None:
        self.peak = 0

    def peak_memory_bytes(self, index: int) -> int | None:
        return self.peak

    def info(self, index: int) -> dict[str, Any]:
        return {"name": f"Fake accelerator {index}", "memory_total_bytes": 2**30}

    def torch_device(self, index: int) -> str:
        return "cpu"
