"""NVIDIA's management library (nvidia-ml-py, optional): facts about a GPU without touching it.

NVML reads the driver's view of a GPU (free memory, temperature, clocks, energy) without creating
a CUDA context, which matters in the parent process: a context there holds memory away from the
workers for the whole suite and, in exclusive-process mode, makes the GPU refuse every worker.

NVML is initialised once per process (:func:`nvml_session`) and shut down at exit. ``nvmlInit``
attaches to every GPU and, on a host without persistence mode, makes the driver bring each one up
and tear it down again at the matching ``nvmlShutdown``: seconds per call on a multi-GPU host,
which an init/shutdown pair around every ``info()`` and ``sensors()`` paid each time.

NVML numbers GPUs by PCI bus and ignores ``CUDA_VISIBLE_DEVICES``; torch does neither. So torch's
index ``i`` is mapped to NVML through the device's UUID, which ``torch.cuda.get_device_properties``
gives without a context. This module is the one place that mapping lives (energy and sensors use
it too).

MIG: torch prints a device's UUID bare (``8-4-4-4-12`` hex, ``_CUuuid.__str__`` in
torch/csrc/cuda/Module.cpp), for a whole GPU and for a MIG slice alike; CUDA gives a slice its MIG
UUID (``cuDeviceGetUuid_v2``). NVML names a whole GPU ``GPU-<uuid>`` and, since driver R470, a slice
``MIG-<uuid>`` (``nvmlDeviceGetHandleByUUID`` takes both). So a bare UUID is tried as ``GPU-`` and
then as ``MIG-``. Drivers before R470 name slices ``MIG-GPU-<gpu uuid>/<gi>/<ci>``, which cannot be
derived from the slice's UUID: that is said as the reason, not missed silently. A slice's memory is
its own (the MIG handle); temperature and SM clock belong to the whole GPU (read through its
parent handle); its energy cannot be read, since the GPU's counter also counts the other slices.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

NOT_INSTALLED = "nvidia-ml-py is not installed (pip install nvidia-ml-py, or the 'energy' extra)"
#: Drivers before R470 name MIG slices in a form that torch's UUID cannot be mapped to.
OLD_MIG_NAMES = ("drivers older than R470 name a MIG slice MIG-GPU-<gpu uuid>/<gi>/<ci>, which "
                 "torch's UUID of the slice cannot be mapped to")


class NvmlUnavailable(Exception):
    """NVML cannot answer here; the message says why."""


def import_nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable(NOT_INSTALLED) from None
    return pynvml


# --- once per process ----------------------------------------------------------------------------
_lock = threading.Lock()
#: (pynvml module, pid) NVML was initialised through in this process; None before.
_session: tuple[Any, int] | None = None
_shutdown_registered = False


def _shutdown() -> None:
    global _session
    with _lock:
        session, _session = _session, None
    if session is not None and session[1] == os.getpid():
        with contextlib.suppress(Exception):  # at exit: nothing left to tell
            session[0].nvmlShutdown()


def nvml_session() -> Any:
    """pynvml, initialised once in this process (shut down at exit); NvmlUnavailable if it
    cannot be. A forked child initialises its own; a different pynvml module (the tests' fakes)
    is initialised when first used."""
    global _session, _shutdown_registered
    pynvml = import_nvml()
    with _lock:
        if _session is not None and _session[0] is pynvml and _session[1] == os.getpid():
            return pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as error:
            raise NvmlUnavailable(f"NVML: {error}") from None
        _session = (pynvml, os.getpid())
        if not _shutdown_registered:
            atexit.register(_shutdown)
            _shutdown_registered = True
    return pynvml


# --- torch's index to NVML's device --------------------------------------------------------------
def gpu_uuid(index: int, torch_module: Any = None) -> str | None:
    """torch's UUID of CUDA device ``index`` as torch prints it (bare for a GPU and a MIG slice
    alike), or None when torch cannot say (no CUDA, a torch too old to report UUIDs)."""
    if torch_module is None:
        import torch as torch_module
    try:
        uuid = str(torch_module.cuda.get_device_properties(index).uuid)
    except Exception:  # noqa: BLE001 - any failure means "unknown", and the caller falls back
        return None
    return uuid or None


def nvml_names(uuid: str) -> tuple[str, ...]:
    """The names NVML may know a device by: a prefixed UUID as it is; a bare one as a whole GPU
    (``GPU-``), then as a MIG slice (``MIG-``, drivers R470 and later)."""
    return (uuid,) if uuid.startswith(("GPU-", "MIG-")) else (f"GPU-{uuid}", f"MIG-{uuid}")


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


@dataclass(frozen=True)
class NvmlDevice:
    """NVML's view of one torch CUDA device: its handle, and for a MIG slice, its GPU's."""

    handle: Any
    #: The name NVML knows it by (``GPU-...``, ``MIG-...``), or its NVML index.
    name: str | int
    #: The whole GPU's handle when this is a MIG slice (None where NVML did not give it).
    parent: Any = None
    mig: bool = False

    @property
    def board(self) -> Any:
        """The handle whose sensors are the board's: the GPU itself, or a slice's parent GPU."""
        if not self.mig:
            return self.handle
        if self.parent is None:
            raise NvmlUnavailable(f"{self.name} is a MIG slice and NVML did not give its GPU")
        return self.parent


def nvml_target(pynvml: Any, index: int, torch_module: Any = None) -> NvmlDevice:
    """NVML's device for torch's CUDA device ``index`` (NVML must be initialised)."""
    uuid = gpu_uuid(index, torch_module)
    last: Exception | None = None
    if uuid is None:
        target = _index_through_visible_devices(index)
        if isinstance(target, int):
            return NvmlDevice(pynvml.nvmlDeviceGetHandleByIndex(target), target)
        names: tuple[str, ...] = (target,)
    else:
        names = nvml_names(uuid)
    for name in names:
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(name)
        except pynvml.NVMLError as error:
            last = error
            continue
        if not name.startswith("MIG-"):
            return NvmlDevice(handle, name)
        parent = None
        with contextlib.suppress(pynvml.NVMLError, AttributeError):
            parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
        return NvmlDevice(handle, name, parent, mig=True)
    hint = f"; if cuda:{index} is a MIG slice, {OLD_MIG_NAMES}" if len(names) > 1 else ""
    raise NvmlUnavailable(f"NVML knows no device named {' or '.join(names)} ({last}){hint}")


def nvml_handle(pynvml: Any, index: int, torch_module: Any = None) -> Any:
    """NVML's handle for torch's CUDA device ``index`` (a MIG slice's own handle for a slice)."""
    return nvml_target(pynvml, index, torch_module).handle


@contextlib.contextmanager
def nvml_device(index: int, torch_module: Any = None) -> Iterator[tuple[Any, NvmlDevice]]:
    """``(pynvml, device)`` for torch's device ``index`` in this process's NVML session.

    Raises NvmlUnavailable when nvidia-ml-py is missing or NVML fails (no driver, no such GPU).
    """
    pynvml = nvml_session()
    try:
        # An NVML error in the body too (a sensor this GPU lacks) is a reason, not a crash.
        yield pynvml, nvml_target(pynvml, index, torch_module)
    except pynvml.NVMLError as error:
        raise NvmlUnavailable(f"NVML: {error}") from None


def memory_info(index: int, torch_module: Any = None) -> dict[str, int]:
    """Free and total memory as the driver sees it (every process's use included); a MIG slice's
    own memory for a slice."""
    with nvml_device(index, torch_module) as (pynvml, device):
        memory = pynvml.nvmlDeviceGetMemoryInfo(device.handle)
        return {"memory_free_bytes": int(memory.free), "memory_total_bytes": int(memory.total)}


def sensors(index: int, torch_module: Any = None) -> dict[str, Any]:
    """GPU temperature (°C) and SM clock (MHz): the whole GPU's, also for a MIG slice (its SMs run
    at the GPU's clock, in the GPU's package)."""
    with nvml_device(index, torch_module) as (pynvml, device):
        board = device.board
        return {
            "gpu_temperature_c": pynvml.nvmlDeviceGetTemperature(board, pynvml.NVML_TEMPERATURE_GPU),
            "gpu_sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(board, pynvml.NVML_CLOCK_SM),
        }
