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

A slice must never be taken for its whole GPU (the GPU's free memory, the board's energy as the
slice's): a runtime whose UUID query predates ``cuDeviceGetUuid_v2`` reports a slice's parent
UUID, which NVML finds as ``GPU-<uuid>``. So ``CUDA_VISIBLE_DEVICES=MIG-<uuid>`` is tried before
torch's UUID, and a whole GPU that NVML says is in MIG mode (CUDA then runs only on its slices)
stands for its slice: the only one, or, with several, a slice whose own handle is unknown, said
so wherever its own handle is needed.
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


def _visible_slice(index: int) -> str | None:
    """The MIG name CUDA_VISIBLE_DEVICES gives torch's device ``index``, or None."""
    try:
        entry = _index_through_visible_devices(index)
    except NvmlUnavailable:
        return None
    return entry if isinstance(entry, str) and entry.startswith("MIG-") else None


@dataclass(frozen=True)
class NvmlDevice:
    """NVML's view of one torch CUDA device: its handle, and for a MIG slice, its GPU's."""

    handle: Any
    #: The name NVML knows it by (``GPU-...``, ``MIG-...``), or its NVML index.
    name: str | int
    #: The whole GPU's handle when this is a MIG slice (None where NVML did not give it).
    parent: Any = None
    mig: bool = False
    #: Why a MIG slice's own handle is unknown (``handle`` is then None): its GPU has several
    #: slices and nothing says which one CUDA runs on.
    unknown_slice: str = ""

    @property
    def board(self) -> Any:
        """The handle whose sensors are the board's: the GPU itself, or a slice's parent GPU."""
        if not self.mig:
            return self.handle
        if self.parent is None:
            raise NvmlUnavailable(f"{self.name} is a MIG slice and NVML did not give its GPU")
        return self.parent

    @property
    def own(self) -> Any:
        """The device's own handle (a slice's, for its own memory); NvmlUnavailable when a
        slice's is unknown."""
        if self.handle is None:
            raise NvmlUnavailable(self.unknown_slice or f"{self.name}: no NVML handle")
        return self.handle


NVML_DEVICE_MIG_ENABLE = 1  # nvmlDeviceGetMigMode's "current" when MIG mode is on


def _mig_enabled(pynvml: Any, handle: Any) -> bool:
    """Whether NVML says MIG mode is on for this GPU (False where it has no MIG, or no such call)."""
    try:
        current = pynvml.nvmlDeviceGetMigMode(handle)[0]
    except (pynvml.NVMLError, AttributeError, TypeError, IndexError):
        return False
    return current == NVML_DEVICE_MIG_ENABLE


def _slices(pynvml: Any, gpu: Any) -> list[Any]:
    """The MIG devices NVML lists on ``gpu`` (an empty place answers NOT_FOUND: skipped)."""
    found: list[Any] = []
    try:
        count = int(pynvml.nvmlDeviceGetMaxMigDeviceCount(gpu))
    except (pynvml.NVMLError, AttributeError):
        return found
    for place in range(count):
        with contextlib.suppress(pynvml.NVMLError):
            found.append(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, place))
    return found


def _slice(pynvml: Any, handle: Any, name: str) -> NvmlDevice:
    parent = None
    with contextlib.suppress(pynvml.NVMLError, AttributeError):
        parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
    return NvmlDevice(handle, name, parent, mig=True)


def _slice_of(pynvml: Any, gpu: Any, name: str | int, index: int) -> NvmlDevice:
    """Torch's device matched the whole GPU ``gpu``, on which NVML says MIG mode is on. CUDA
    runs only on slices of a GPU in MIG mode, so the device is one of them (a runtime that reports
    a slice's parent UUID, as cuDeviceGetUuid before its _v2 does, matches the whole GPU): its
    slice when the GPU has one, else the slice's own handle is unknown and said so."""
    slices = _slices(pynvml, gpu)
    if len(slices) == 1:
        slice_name = name
        with contextlib.suppress(pynvml.NVMLError, AttributeError):
            slice_name = str(pynvml.nvmlDeviceGetUUID(slices[0]))
        return NvmlDevice(slices[0], slice_name, gpu, mig=True)
    return NvmlDevice(None, name, gpu, mig=True, unknown_slice=(
        f"cuda:{index} is a MIG slice of {name} (NVML says MIG mode is on), which has "
        f"{len(slices)} slices; which one is not known: name it in CUDA_VISIBLE_DEVICES "
        "(MIG-<uuid>, as nvidia-smi -L lists them)"))


def nvml_target(pynvml: Any, index: int, torch_module: Any = None) -> NvmlDevice:
    """NVML's device for torch's CUDA device ``index`` (NVML must be initialised). A MIG slice
    is preferred wherever one is meant: CUDA_VISIBLE_DEVICES naming ``MIG-<uuid>`` is tried
    first, and a whole GPU that NVML says is in MIG mode stands for its slice."""
    uuid = gpu_uuid(index, torch_module)
    visible_slice = _visible_slice(index)
    last: Exception | None = None
    if uuid is None and visible_slice is None:
        target = _index_through_visible_devices(index)
        if isinstance(target, int):
            handle = pynvml.nvmlDeviceGetHandleByIndex(target)
            return _slice_of(pynvml, handle, target, index) if _mig_enabled(pynvml, handle) \
                else NvmlDevice(handle, target)
        names: tuple[str, ...] = (target,)
    else:
        names = tuple(dict.fromkeys([*([visible_slice] if visible_slice else []),
                                     *(nvml_names(uuid) if uuid else ())]))
    for name in names:
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(name)
        except pynvml.NVMLError as error:
            last = error
            continue
        if name.startswith("MIG-"):
            return _slice(pynvml, handle, name)
        if _mig_enabled(pynvml, handle):
            return _slice_of(pynvml, handle, name, index)
        return NvmlDevice(handle, name)
    hint = f"; if cuda:{index} is a MIG slice, {OLD_MIG_NAMES}" if len(names) > 1 else ""
    raise NvmlUnavailable(f"NVML knows no device named {' or '.join(names)} ({last}){hint}")


def nvml_handle(pynvml: Any, index: int, torch_module: Any = None) -> Any:
    """NVML's handle for torch's CUDA device ``index`` (a MIG slice's own handle for a slice)."""
    return nvml_target(pynvml, index, torch_module).own


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
        memory = pynvml.nvmlDeviceGetMemoryInfo(device.own)
        return {"memory_free_bytes": int(memory.free), "memory_total_bytes": int(memory.total)}


#: NVML's clock-event (throttle) reason bits (``nvmlClocksEventReason*`` in nvml.h; the older
#: ``nvmlClocksThrottleReason*`` have the same values), in the words a result shows.
CLOCK_EVENT_REASONS = {
    0x1: "gpu idle", 0x2: "applications clocks setting", 0x4: "software power cap",
    0x8: "hardware slowdown", 0x10: "sync boost", 0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown", 0x80: "hardware power brake slowdown",
    0x100: "display clock setting",
}
#: Those that hold a busy GPU's clock below what it would run at: a throttle's cause.
SLOWDOWN_REASONS = ("software power cap", "hardware slowdown", "software thermal slowdown",
                    "hardware thermal slowdown", "hardware power brake slowdown")
#: nvmlDeviceGetFieldValues' field for the memory (HBM) temperature, and the threshold above
#: which the memory slows down (nvml.h; pynvml names them where new enough).
FIELD_MEMORY_TEMPERATURE = 82
THRESHOLD_MEMORY_MAX = 2
#: nvmlValueType_t -> the union member holding a field's value.
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}


def clock_event_reasons(pynvml: Any, handle: Any) -> list[str] | None:
    """The reasons NVML gives now for the GPU's clock being where it is (words of
    CLOCK_EVENT_REASONS), through the call the installed nvidia-ml-py has (renamed from
    ...ThrottleReasons to ...EventReasons in driver R535); None where neither answers."""
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        read = getattr(pynvml, name, None)
        if read is None:
            continue
        try:
            mask = int(read(handle))
        except pynvml.NVMLError:
            return None
        return [word for bit, word in CLOCK_EVENT_REASONS.items() if mask & bit]
    return None


def memory_temperature(pynvml: Any, handle: Any) -> float | None:
    """The memory's temperature (°C) through the field-values call (HBM boards report it, GDDR
    ones answer NOT_SUPPORTED); None where not reported."""
    read = getattr(pynvml, "nvmlDeviceGetFieldValues", None)
    if read is None:
        return None
    field_id = getattr(pynvml, "NVML_FI_DEV_MEMORY_TEMP", FIELD_MEMORY_TEMPERATURE)
    try:
        value = read(handle, [field_id])[0]
    except (pynvml.NVMLError, IndexError, TypeError):
        return None
    if getattr(value, "nvmlReturn", 1) != 0:
        return None
    number = getattr(value.value, _VALUE_MEMBERS.get(getattr(value, "valueType", 1), "uiVal"), None)
    return float(number) if isinstance(number, int | float) and number > 0 else None


def sensors(index: int, torch_module: Any = None) -> dict[str, Any]:
    """GPU temperature (°C) and SM clock (MHz): the whole GPU's, also for a MIG slice (its SMs run
    at the GPU's clock, in the GPU's package); where NVML gives them, the memory temperature and
    the clock-event reasons (``gpu_clock_events``: words, [] for none)."""
    with nvml_device(index, torch_module) as (pynvml, device):
        board = device.board
        facts: dict[str, Any] = {
            "gpu_temperature_c": pynvml.nvmlDeviceGetTemperature(board, pynvml.NVML_TEMPERATURE_GPU),
            "gpu_sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(board, pynvml.NVML_CLOCK_SM),
        }
        memory = memory_temperature(pynvml, board)
        if memory is not None:
            facts["gpu_memory_temperature_c"] = memory
        reasons = clock_event_reasons(pynvml, board)
        if reasons is not None:
            facts["gpu_clock_events"] = reasons
        return facts
