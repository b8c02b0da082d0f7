"""NVIDIA's management library (nvidia-ml-py, optional): facts about a GPU without touching it.

NVML reads the driver's view of a GPU (free memory, temperature, clocks, energy) without creating
a CUDA context, which matters in the parent process: a context there holds memory away from the
workers for the whole suite and, in exclusive-process mode, makes the GPU refuse every worker.

NVML numbers GPUs by PCI bus and ignores ``CUDA_VISIBLE_DEVICES``; torch does neither. So torch's
index ``i`` is mapped to NVML through the GPU's UUID, which ``torch.cuda.get_device_properties``
gives without a context. This module is the one place that mapping lives (energy and sensors use
it too).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

NOT_INSTALLED = "nvidia-ml-py is not installed (pip install nvidia-ml-py, or the 'energy' extra)"


class NvmlUnavailable(Exception):
    """NVML cannot answer here; the message says why."""


def import_nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable(NOT_INSTALLED) from None
    return pynvml


def gpu_uuid(index: int, torch_module: Any = None) -> str | None:
    """The NVML-style UUID (``GPU-...`` or ``MIG-...``) of torch's CUDA device ``index``, or None
    when torch cannot say (no CUDA, a torch too old to report UUIDs)."""
    if torch_module is None:
        import torch as torch_module
    try:
        uuid = str(torch_module.cuda.get_device_properties(index).uuid)
    except Exception:  # noqa: BLE001 - any failure means "unknown", and the caller falls back
        return None
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def _index_through_visible_devices(index: int) -> int | str:
    """Torch's index ``index`` in NVML's terms from CUDA_VISIBLE_DEVICES: an NVML index or a UUID."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return index
    entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
    if index >= len(entries):
        raise NvmlUnavailable(f"CUDA_VISIBLE_DEVICES={visible!r} has no entry {index}")
    entry = entries[index]
    return int(entry) if entry.isdigit() else entry


def nvml_handle(pynvml: Any, index: int, torch_module: Any = None) -> Any:
    """NVML's handle for torch's CUDA device ``index`` (NVML must be initialised)."""
    uuid = gpu_uuid(index, torch_module)
    target = uuid if uuid is not None else _index_through_visible_devices(index)
    if isinstance(target, int):
        return pynvml.nvmlDeviceGetHandleByIndex(target)
    return pynvml.nvmlDeviceGetHandleByUUID(target)


@contextlib.contextmanager
def nvml_device(index: int, torch_module: Any = None) -> Iterator[tuple[Any, Any]]:
    """``(pynvml, handle)`` for torch's device ``index``, NVML shut down afterwards.

    Raises NvmlUnavailable when nvidia-ml-py is missing or NVML fails (no driver, no such GPU).
    """
    pynvml = import_nvml()
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        raise NvmlUnavailable(f"NVML: {error}") from None
    try:
        # An NVML error in the body too (a sensor this GPU lacks) is a reason, not a crash.
        yield pynvml, nvml_handle(pynvml, index, torch_module)
    except pynvml.NVMLError as error:
        raise NvmlUnavailable(f"NVML: {error}") from None
    finally:
        pynvml.nvmlShutdown()


def memory_info(index: int, torch_module: Any = None) -> dict[str, int]:
    """Free and total memory of the GPU as the driver sees it (every process's use included)."""
    with nvml_device(index, torch_module) as (pynvml, handle):
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return {"memory_free_bytes": int(memory.free), "memory_total_bytes": int(memory.total)}


def sensors(index: int, torch_module: Any = None) -> dict[str, Any]:
    """GPU temperature (°C) and SM clock (MHz)."""
    with nvml_device(index, torch_module) as (pynvml, handle):
        return {
            "gpu_temperature_c": pynvml.nvmlDeviceGetTemperature(handle,
                                                                 pynvml.NVML_TEMPERATURE_GPU),
            "gpu_sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        }
