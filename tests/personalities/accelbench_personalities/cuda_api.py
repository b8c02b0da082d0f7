"""``torch.cuda`` (and what hangs off it: cuDNN's availability, NCCL) for an emulated NVIDIA GPU.

accelbench's real CudaAdapter discovers and drives the device through these: ``is_available``,
``device_count``, ``get_device_properties`` (compute capability, name, memory), ``set_device``,
``synchronize`` and the allocator's peak. NCCL is answered by gloo, which carries the emulated
device's tensors because they are CPU tensors underneath.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import torch

from accelbench_personalities import device_api, emulated
from accelbench_personalities.patches import replace


class CudaUuid:
    """Prints like torch's ``_CUDAuuid``: the bare UUID, without NVML's ``GPU-`` prefix."""

    def __init__(self, index: int) -> None:
        self.text = f"0000000{index}-a100-4e00-8000-0000000000{index:02d}"

    def __str__(self) -> str:
        return self.text


def device_properties(name: str, major: int, minor: int, total_memory: int,
                      multiprocessors: int) -> Any:
    def of(device: Any = None) -> Any:
        index = device_api.device_of(device).index or 0
        return SimpleNamespace(name=name, major=major, minor=minor, total_memory=total_memory,
                               multi_processor_count=multiprocessors, uuid=CudaUuid(index),
                               is_integrated=False, is_multi_gpu_board=False,
                               L2_cache_size=40 * 2**20, warp_size=32)
    return of


class _DeviceContext:
    """``torch.cuda.device(i)``: makes ``i`` current inside."""

    def __init__(self, device: Any) -> None:
        self.index = -1 if device is None else device_api.device_of(device).index or 0
        self.previous = -1

    def __enter__(self) -> None:
        self.previous = emulated.state.current_index
        if self.index >= 0:
            emulated.state.current_index = self.index

    def __exit__(self, *exc: object) -> None:
        if self.index >= 0:
            emulated.state.current_index = self.previous


def patch_cuda(name: str, major: int, minor: int, total_memory: int, multiprocessors: int) -> None:
    cuda = torch.cuda
    make_event = device_api.CudaLikeEvent
    properties = device_properties(name, major, minor, total_memory, multiprocessors)

    def make_cuda_event(enable_timing: bool = False, blocking: bool = False,
                        interprocess: bool = False, external: bool = False) -> Any:
        return make_event(device_api.device_of(None), enable_timing=enable_timing)

    @contextlib.contextmanager
    def stream(value: Any) -> Iterator[Any]:
        yield value

    values: dict[str, Any] = {
        "_lazy_init": lambda: None,
        "is_initialized": lambda: True,
        "_is_in_bad_fork": lambda: False,
        "is_available": lambda: True,
        "device_count": lambda: emulated.state.rules.device_count,
        "current_device": lambda: emulated.state.current_index,
        "set_device": device_api.set_device_index,
        "device": _DeviceContext,
        "get_device_properties": properties,
        "get_device_name": lambda device=None: properties(device).name,
        "get_device_capability": lambda device=None: (major, minor),
        "is_bf16_supported": lambda including_emulation=True: major >= 8,
        "synchronize": device_api.synchronize,
        "memory_allocated": device_api.memory_allocated,
        "max_memory_allocated": device_api.max_memory_allocated,
        "memory_reserved": device_api.memory_allocated,
        "max_memory_reserved": device_api.max_memory_allocated,
        "reset_peak_memory_stats": device_api.reset_peak_memory_stats,
        "reset_max_memory_allocated": device_api.reset_peak_memory_stats,
        "memory_stats": device_api.memory_stats,
        "empty_cache": device_api.empty_cache,
        "mem_get_info": lambda device=None: (total_memory - emulated.memory.allocated,
                                             total_memory),
        "Event": make_cuda_event,
        "Stream": lambda device=None, priority=0: device_api.FakeStream(
            device_api.device_of(device), make_event),
        "current_stream": lambda device=None: device_api.FakeStream(
            device_api.device_of(device), make_event),
        "default_stream": lambda device=None: device_api.FakeStream(
            device_api.device_of(device), make_event),
        "stream": stream,
        "get_rng_state": lambda device="cuda": torch.zeros(16, dtype=torch.uint8),
        "set_rng_state": lambda new_state, device="cuda": None,
        "get_rng_state_all": lambda: [torch.zeros(16, dtype=torch.uint8)],
        "set_rng_state_all": lambda new_states: None,
        "manual_seed": lambda seed: None,
        "manual_seed_all": lambda seed: None,
        "seed": lambda: None,
        "seed_all": lambda: None,
    }
    for attribute, value in values.items():
        replace(cuda, attribute, value)
    if not torch.version.cuda:  # a CPU-only build: the adapter asks which CUDA torch was built for
        replace(torch.version, "cuda", "12.8")
    replace(torch.backends.cudnn, "is_available", lambda: True)
    replace(torch.backends.cudnn, "version", lambda: 90100)
    device_api.patch_accelerator(device_api.CudaLikeEvent, total_memory)
    device_api.patch_event(device_api.CudaLikeEvent)
    _nccl_is_gloo()


def _nccl_is_gloo() -> None:
    """NCCL, answered by gloo: the tensors are CPU tensors underneath."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    init = dist.init_process_group
    available = dist.is_backend_available

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(backend, str) and "nccl" in backend:
            backend = "gloo"
        return init(backend, *args, **kwargs)

    replace(dist, "init_process_group", init_process_group)
    replace(dist, "is_nccl_available", lambda: True)
    replace(dist, "is_backend_available", lambda backend: backend == "nccl" or available(backend))
