"""Intel GPUs through torch.xpu.

TF32 on an Intel GPU is oneDNN's switch, ``torch.backends.mkldnn.allow_tf32`` (torch >= 2.7): the
XPU matmul and convolution kernels read it (``allowTF32OneDNN()`` in ATen's
``native/mkldnn/xpu/detail``), not the fp32 matmul precision or cuDNN's switch, so without it a
"tf32" case on XPU silently runs fp32. A torch built without XPU reads it as None and warns when
it is set; one before 2.7 has no TF32 on XPU at all.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from accelbench.devices.base import Availability, DeviceAdapter, current_device, set_current_device

ONEDNN_TF32_FLAG = "onednn_allow_tf32"


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

    def reset_peak_memory(self, index: int) -> bool:
        self._torch.xpu.reset_peak_memory_stats(index)
        return True

    def peak_memory_bytes(self, index: int) -> int | None:
        return int(self._torch.xpu.max_memory_allocated(index))

    def info(self, index: int) -> dict[str, Any]:
        props = self._torch.xpu.get_device_properties(index)
        return {
            "name": props.name,
            "memory_total_bytes": int(props.total_memory),
            "compute_units": getattr(props, "max_compute_units", None),
            "driver_version": getattr(props, "driver_version", None),
            # As torch.xpu.is_tf32_supported() decides it (for any device index): TF32 runs on the
            # DPAS (XMX) units; and it needs the oneDNN switch this torch may lack.
            "tf32": self._onednn_tf32() is not None
            and bool(getattr(props, "has_subgroup_matrix_multiply_accumulate", False)),
        }

    def _onednn_tf32(self) -> bool | None:
        """oneDNN's TF32 switch, or None where this torch has none for XPU."""
        mkldnn = getattr(getattr(self._torch, "backends", None), "mkldnn", None)
        value = getattr(mkldnn, "allow_tf32", None)
        return None if value is None else bool(value)

    def allow_tf32(self, allowed: bool) -> Callable[[], None]:
        previous = self._onednn_tf32()
        if previous is None:
            return super().allow_tf32(allowed)
        mkldnn = self._torch.backends.mkldnn
        mkldnn.allow_tf32 = allowed

        def put_back() -> None:
            mkldnn.allow_tf32 = previous

        return put_back

    def tf32_flags(self) -> dict[str, bool]:
        value = self._onednn_tf32()
        return {} if value is None else {ONEDNN_TF32_FLAG: value}
