"""Any other accelerator torch knows through ``torch.accelerator`` (HPU, NPU, PrivateUse1 ...)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from accelbench.devices.base import Availability, DeviceAdapter, current_device, set_current_device


class GenericAcceleratorAdapter(DeviceAdapter):
    """Uses only the device-neutral ``torch.accelerator`` API (torch >= 2.6)."""

    def __init__(self, kind: str, torch_module: Any = None) -> None:
        if torch_module is None:
            import torch as torch_module
        self._torch = torch_module
        self.kind = kind

    def availability(self) -> Availability:
        count = int(self._torch.accelerator.device_count())
        if count == 0:
            return Availability(self.kind, False, reason="torch.accelerator reports no device")
        return Availability(self.kind, True, count=count)

    memory_source = "torch.accelerator.max_memory_allocated (the back end's allocator peak)"

    def synchronize(self, index: int) -> None:
        self._torch.accelerator.synchronize(index)

    def make_current(self, index: int) -> None:
        set_current_device(self._torch, self.kind, index)

    def current(self, index: int) -> AbstractContextManager[None]:
        return current_device(self._torch, self.kind, index)

    def reset_peak_memory(self, index: int) -> bool:
        reset = getattr(self._torch.accelerator, "reset_peak_memory_stats", None)
        if reset is None:
            return False
        try:
            reset(index)
        except (RuntimeError, NotImplementedError):
            return False
        return True

    def peak_memory_bytes(self, index: int) -> int | None:
        peak = getattr(self._torch.accelerator, "max_memory_allocated", None)
        if peak is None:
            return None
        try:
            return int(peak(index))
        except (RuntimeError, NotImplementedError):
            return None

    def info(self, index: int) -> dict[str, Any]:
        info: dict[str, Any] = {"name": f"{self.kind}:{index} (torch.accelerator)"}
        mem_info = getattr(self._torch.accelerator, "get_memory_info", None)
        if mem_info is not None:
            try:
                free, total = mem_info(index)
                info.update(memory_free_bytes=int(free), memory_total_bytes=int(total))
            except (RuntimeError, NotImplementedError, TypeError):
                pass
        return info
