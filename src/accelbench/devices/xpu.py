"""Intel GPUs through torch.xpu."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from accelbench.devices.base import Availability, DeviceAdapter, current_device, set_current_device


class XpuAdapter(DeviceAdapter):
    kind = "xpu"
    distributed_backend = "xccl"
    memory_source = "XPU caching allocator peak (torch.xpu.max_memory_allocated: live tensors)"
    pin_memory = True

    def __init__(self, torch_module: Any = None) -> None:
        if torch_module is None:
            import torch as torch_module
        self._torch = torch_module

    def _built(self) -> bool:
        xpu = getattr(self._torch, "xpu", None)
        if xpu is None:
            return False
        compiled = getattr(xpu, "_is_compiled", None)
        return bool(compiled()) if compiled is not None else True

    def availability(self) -> Availability:
        if not self._built():
            return Availability("xpu", False, built=False,
                                reason="this torch build has no XPU (Intel GPU) support",
                                fix="install an XPU build of torch (the selector at "
                                "pytorch.org/get-started)")
        if not self._torch.xpu.is_available():
            return Availability("xpu", False,
                                reason="torch is built with XPU but no Intel GPU or driver "
                                "was found",
                                fix="install Intel's GPU driver and oneAPI runtime")
        return Availability("xpu", True, count=int(self._torch.xpu.device_count()))

    def synchronize(self, index: int) -> None:
        self._torch.xpu.synchronize(index)

    def make_current(self, index: int) -> None:
        set_current_device(self._torch, self.kind, index)

    def current(self, index: int) -> AbstractContextManager[None]:
        return current_device(self._torch, self.kind, index)

    def reset_peak_memory(self, index: int) -> None:
        self._torch.xpu.reset_peak_memory_stats(index)

    def peak_memory_bytes(self, index: int) -> int | None:
        return int(self._torch.xpu.max_memory_allocated(index))

    def info(self, index: int) -> dict[str, Any]:
        props = self._torch.xpu.get_device_properties(index)
        return {
            "name": props.name,
            "memory_total_bytes": int(props.total_memory),
            "compute_units": getattr(props, "max_compute_units", None),
            "driver_version": getattr(props, "driver_version", None),
        }
