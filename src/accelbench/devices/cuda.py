"""NVIDIA CUDA (and AMD ROCm, which torch exposes as ``cuda`` too)."""

from __future__ import annotations

import os
import warnings
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from accelbench.devices import nvml
from accelbench.devices.base import Availability, DeviceAdapter, current_device, set_current_device

_DRIVER_FILE = Path("/proc/driver/nvidia/version")
_INSTALL_HINT = "install a CUDA build of torch (the selector at pytorch.org/get-started)"


class CudaAdapter(DeviceAdapter):
    kind = "cuda"
    distributed_backend = "nccl"  # RCCL under the same name on ROCm
    energy_sources = ("nvml",)
    memory_source = ("CUDA caching allocator peak (torch.cuda.max_memory_allocated: live tensors; "
                     "not the allocator's cache or the CUDA context)")
    pin_memory = True
    # torch/_inductor/cudagraph_trees.py: the graph modes' cudagraphify runs on CUDA devices.
    graph_capture = "CUDA graphs"

    def __init__(self, torch_module: Any = None, driver_file: Path = _DRIVER_FILE) -> None:
        if torch_module is None:
            import torch as torch_module
        self._torch = torch_module
        self._driver_file = driver_file

    def _build(self) -> tuple[str | None, str | None]:
        version = self._torch.version
        return getattr(version, "cuda", None), getattr(version, "hip", None)

    def availability(self) -> Availability:
        cuda_version, hip_version = self._build()
        if not cuda_version and not hip_version:
            return Availability(
                "cuda", False, built=False,
                reason="this torch build has no CUDA support (CPU-only build)",
                fix=_INSTALL_HINT,
            )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            available = bool(self._torch.cuda.is_available())
            count = int(self._torch.cuda.device_count()) if available else 0
        if available and count > 0:
            return Availability("cuda", True, count=count)
        torch_says = next((str(w.message).splitlines()[0] for w in caught), "")
        return Availability("cuda", False, reason=self._why_unavailable(hip_version, torch_says),
                            fix=self._fix(hip_version, torch_says))

    def _why_unavailable(self, hip_version: str | None, torch_says: str) -> str:
        if torch_says:
            return f"torch says: {torch_says}"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and visible.strip() in ("", "-1"):
            return f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
        if hip_version:
            return f"torch is built for ROCm {hip_version} but no AMD GPU or ROCm driver was found"
        cuda_version, _ = self._build()
        if not self._driver_file.exists():
            return f"torch is built with CUDA {cuda_version} but no NVIDIA driver was found"
        return f"the NVIDIA driver is loaded but torch (CUDA {cuda_version}) sees no usable GPU"

    def _fix(self, hip_version: str | None, torch_says: str) -> str:
        if "too old" in torch_says:
            return "update the NVIDIA driver, or install a torch built for an older CUDA"
        if os.environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1"):
            return "unset CUDA_VISIBLE_DEVICES or list the GPUs to use"
        if hip_version:
            return "install the ROCm driver stack for your AMD GPU"
        if not self._driver_file.exists():
            return "install the NVIDIA driver (nvidia-smi must list the GPU)"
        return "check nvidia-smi; the GPU may be in use exclusively or in a bad state"

    def synchronize(self, index: int) -> None:
        self._torch.cuda.synchronize(index)

    def reset_peak_memory(self, index: int) -> bool:
        self._torch.cuda.reset_peak_memory_stats(index)
        return True

    def peak_memory_bytes(self, index: int) -> int | None:
        return int(self._torch.cuda.max_memory_allocated(index))

    def make_current(self, index: int) -> None:
        set_current_device(self._torch, self.kind, index)

    def current(self, index: int) -> AbstractContextManager[None]:
        return current_device(self._torch, self.kind, index)

    def sensors(self, index: int) -> dict[str, Any]:
        """GPU temperature and SM clock through NVML (nvidia-ml-py), when it is installed."""
        try:
            return nvml.sensors(index, self._torch)
        except nvml.NvmlUnavailable as error:
            return {} if str(error) == nvml.NOT_INSTALLED else {"error": str(error)}

    def info(self, index: int) -> dict[str, Any]:
        """Described without creating a CUDA context (this runs in the parent process, which
        must leave the GPUs to the workers): properties come from torch's device query, free
        memory from NVML. ``torch.cuda.mem_get_info`` would create a context on the GPU."""
        props = self._torch.cuda.get_device_properties(index)
        cuda_version, hip_version = self._build()
        info: dict[str, Any] = {
            "name": props.name,
            "memory_total_bytes": int(props.total_memory),
            "compute_capability": f"{props.major}.{props.minor}",
            "multiprocessors": getattr(props, "multi_processor_count", None),
            "last_level_cache_bytes": getattr(props, "L2_cache_size", None),
            "cuda_version": cuda_version,
            "hip_version": hip_version,
        }
        try:
            info["memory_free_bytes"] = nvml.memory_info(index, self._torch)["memory_free_bytes"]
        except nvml.NvmlUnavailable as error:
            info["memory_free_note"] = f"free memory not read: {error}"
        return info
