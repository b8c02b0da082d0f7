"""The emulated device: CPU tensors that say they live on ``cuda:N`` or ``mps:0``.

Why this shape (each alternative was tried on torch 2.14.1 and failed):

- A wrapper subclass made with ``device="cuda"`` (FakeTensor's and DTensor's way) carries CUDA's
  dispatch keys, and autograd then asks CUDA's device guard for the current stream: on a CUDA
  build without a driver the process aborts in ``c10::cuda::device_count``; a CPU-only build has
  no CUDA (or MPS) guard at all. So the C++ tensor stays a CPU tensor, with its own storage (the
  gloo back end, ``tolist`` and ``deepcopy`` read it), and only Python sees the device:
  :class:`DeviceTensor` answers ``.device``, ``.is_cuda``, ``.is_mps``, ``.get_device()``.
- Every aten op on a DeviceTensor reaches :meth:`DeviceTensor.__torch_dispatch__`, *below*
  autograd: forward and backward ops, optimiser updates and the ops a compiled function runs in
  eager fallback all pass through it, and the personality's :class:`Rules` decide what they do
  (round to TF32, refuse float64, fall back to the CPU with a warning ...).
- How tensors get onto the device (factories, ``Tensor.to``, autocast, torch.compile) is
  placement.py's job.

Known gaps (see README.md): C++ code that builds tensors from a DeviceTensor's options makes
plain CPU tensors (autograd's zero-filled gradients, DDP's buckets), and ops on those alone are
not the device's; a mix of a DeviceTensor and a CPU tensor is refused only for calls made from
Python (``__torch_function__``), as CUDA refuses them.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch._C import _DisableTorchDispatch
from torch.utils._pytree import tree_flatten, tree_map

aten = torch.ops.aten
CPU = torch.device("cpu")


class Rules:
    """What a personality changes about its device. The base changes nothing."""

    #: The device type the tensors claim ("cuda" or "mps").
    device_type = "cuda"
    device_count = 1

    def before_op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  device: torch.device) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Called for every op on the device, before it runs: may raise, warn or rewrite."""
        return args, kwargs

    def check_outputs(self, func: Any, outputs: list[torch.Tensor], device: torch.device) -> None:
        """Called with the op's new tensors on the device: may raise (MPS has no float64)."""

    def keeps_busy(self, func: Any) -> bool:
        """Whether the op leaves the device busy until the host next waits for it (see
        :func:`completion_ns`). None do on the base device."""
        return False

    def host_sync(self, device: torch.device) -> None:
        """The host waits for the device (``synchronize``, ``.item()``, a copy to the host)."""

    def implementation(self, func: Any) -> Any:
        """What runs for ``func`` on the device's CPU tensors: ``func`` itself, except the
        device's own kernels a CPU lacks (int4pack.py)."""
        return func


#: The host clock, taken before a personality may coarsen ``time.perf_counter``.
now_ns: Callable[[], int] = time.perf_counter_ns


class _State:
    rules: Rules = Rules()
    current_index = 0
    #: The host time the device's last op returned (ops compute on the CPU as dispatched).
    work_done_ns = 0
    #: Work that keeps the device busy was queued since the host last waited for it.
    busy = False


def completion_ns() -> int:
    """When an event recorded now completes. The device computes as ops are dispatched, but a
    busy device (rules.keeps_busy) reaches an event only when its queued work ends, which is
    when the last op returned: events recorded back to back on it complete together, and one
    recorded after more work completes later. On an idle device, now."""
    return state.work_done_ns if state.busy else now_ns()


def host_waited(device: torch.device) -> None:
    """The host waited for the device: its queue is empty."""
    state.busy = False
    state.rules.host_sync(device)


state = _State()


# --- memory: live bytes of device tensors, and their peak ---------------------------------------
class Memory:
    """Bytes of the storages that device tensors hold, counted per storage (views share one)."""

    def __init__(self) -> None:
        self.live: dict[int, list[int]] = {}  # data_ptr -> [bytes, tensors holding it]
        self.allocated = 0
        self.peak = 0

    def track(self, tensor: torch.Tensor) -> None:
        storage = torch.Tensor.untyped_storage(tensor)
        pointer = storage.data_ptr()
        if pointer == 0:
            return
        entry = self.live.get(pointer)
        if entry is None:
            entry = self.live[pointer] = [storage.nbytes(), 0]
            self.allocated += entry[0]
            self.peak = max(self.peak, self.allocated)
        entry[1] += 1
        weakref.finalize(tensor, self._release, pointer)

    def _release(self, pointer: int) -> None:
        entry = self.live.get(pointer)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del self.live[pointer]
            self.allocated -= entry[0]

    def reset_peak(self) -> None:
        self.peak = self.allocated

    def transient(self, nbytes: int) -> None:
        """``nbytes`` allocated and freed within one op (a workspace): counted in the peak only."""
        self.peak = max(self.peak, self.allocated + nbytes)


memory = Memory()


# --- the tensor ---------------------------------------------------------------------------------
def normalize(device: Any) -> torch.device:
    """``cuda`` -> ``cuda:<current>``; an index past the device count is CUDA's own error."""
    device = torch.device(device) if not isinstance(device, torch.device) else device
    if device.type != state.rules.device_type:
        return device
    index = state.current_index if device.index is None else device.index
    if index >= state.rules.device_count:
        raise RuntimeError(f"{device.type.upper()} error: invalid device ordinal "
                           f"({device.type}:{index}; this machine has {state.rules.device_count})")
    return torch.device(device.type, index)


def is_emulated(device: Any) -> bool:
    if device is None or isinstance(device, int):
        return False
    try:
        return torch.device(device).type == state.rules.device_type
    except (RuntimeError, TypeError):
        return False


def as_device(tensor: torch.Tensor, device: torch.device) -> DeviceTensor:
    """``tensor``'s data as a tensor on the emulated ``device`` (an alias, not a copy)."""
    with _DisableTorchDispatch():
        out = tensor.as_subclass(DeviceTensor)
    out._device = device
    memory.track(out)
    return out  # type: ignore[return-value]


def numpy_refusal(tensor: DeviceTensor) -> TypeError:
    return TypeError(f"can't convert {tensor._device} device type tensor to numpy. Use Tensor.cpu() "
                     "to copy the tensor to host memory first.")


class DeviceTensor(torch.Tensor):
    """A CPU tensor that lives, as far as Python can tell, on the emulated device."""

    _device: torch.device

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return self._device

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return self._device.type == "cuda"

    @property
    def is_mps(self) -> bool:  # type: ignore[override]
        return self._device.type == "mps"

    @property
    def is_cpu(self) -> bool:  # type: ignore[override]
        return False

    def get_device(self) -> int:  # type: ignore[override]
        return int(self._device.index or 0)

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        with _DisableTorchDispatch():
            text = torch.Tensor.__repr__(self.as_subclass(torch.Tensor))
        return f"{text[:-1]}, device='{self._device}')"

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch._C.TensorBase.cpu:
            return to_host(args[0])
        if func is torch._C.TensorBase.tolist:
            return to_host(args[0]).tolist()
        if func in (torch._C.TensorBase.numpy, torch.Tensor.__array__):
            raise numpy_refusal(args[0])
        if func is torch._has_compatible_shallow_copy_type:
            # Module.to would otherwise move a parameter by ``param.data = on_device``, leaving
            # a CPU Parameter object in place: a device tensor is not a CPU tensor's kind.
            return type(args[0]) is type(args[1])
        if getattr(func, "__name__", "") not in MIXED_DEVICES_ALLOWED:
            refuse_mixed_devices(args, kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return run_on_device(func, args, kwargs or {})


#: Python-level calls that may mix the device and the CPU: copies, indexing with CPU indices,
#: and calls that only compare or attach tensors (``param.data = ...``, ``.grad = ...``).
MIXED_DEVICES_ALLOWED = frozenset({
    "copy_", "__getitem__", "__setitem__", "__format__", "__repr__", "__set__", "__get__",
    "set_", "__setstate__", "__reduce_ex__", "__deepcopy__", "_has_compatible_shallow_copy_type",
    "is_same_size", "__eq__", "__ne__", "__hash__", "to", "cpu", "cuda",
})


def refuse_mixed_devices(args: Any, kwargs: Any) -> None:
    """CUDA and MPS refuse an op on tensors of two devices (a 0-dim CPU tensor is a scalar)."""
    flat = tree_flatten((args, kwargs))[0]
    devices = {t._device for t in flat if isinstance(t, DeviceTensor)}
    plain = any(isinstance(t, torch.Tensor) and not isinstance(t, DeviceTensor) and t.dim() > 0
                and t.device.type == "cpu" for t in flat)
    if len(devices) > 1 or (devices and plain):
        names = sorted(str(d) for d in devices) + (["cpu"] if plain else [])
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two "
                           f"devices, {names[0]} and {names[1]}!")


class _HostCopy(threading.local):
    wanted = 0


_host_copy = _HostCopy()


def to_host(tensor: DeviceTensor, **options: Any) -> torch.Tensor:
    """A plain CPU copy, through autograd (``_to_copy`` is differentiable). C++ passes
    ``device=cpu`` to every ``_to_copy`` it makes for a dtype or layout change (the tensor is a
    CPU tensor to C++), so a copy to the host is told apart by this flag."""
    _host_copy.wanted += 1
    try:
        return aten._to_copy.default(tensor, device=CPU, **options)
    finally:
        _host_copy.wanted -= 1


#: Ops that copy between devices: several devices among their tensors are allowed.
_COPIES = {aten.copy_.default, aten._to_copy.default, aten.copy.default, aten._copy_from.default,
           aten._copy_from_and_resize.default}
#: Ops after which the host has the device's data: a synchronisation.
_HOST_READS = {aten._local_scalar_dense.default}


def run_on_device(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run one aten op whose tensors (or ``device=`` argument) are on the emulated device."""
    flat = tree_flatten((args, kwargs))[0]
    devices = [t._device for t in flat if isinstance(t, DeviceTensor)]
    target = kwargs.get("device")
    rules = state.rules
    if func is aten._to_copy.default and devices and _host_copy.wanted:
        host_waited(devices[0])
        with _DisableTorchDispatch():
            return func(*args, **kwargs)  # a plain CPU copy
    if func is aten._to_copy.default and devices and target is not None \
            and not is_emulated(target):
        kwargs = {**kwargs, "device": devices[0]}  # C++'s own device: a conversion on the device
        target = devices[0]
    if is_emulated(target):
        device = normalize(target)
        kwargs = {**kwargs, "device": CPU}
    elif devices:
        device = devices[0]
        if func not in _COPIES and any(d != device for d in devices):
            other = next(d for d in devices if d != device)
            raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                               f"two devices, {device} and {other}!")
    else:  # nothing on the device after all
        with _DisableTorchDispatch():
            return func(*args, **kwargs)
    if func in _HOST_READS:
        host_waited(device)
    args, kwargs = rules.before_op(func, args, kwargs, device)
    with _DisableTorchDispatch():
        out = rules.implementation(func)(*args, **kwargs)
    inputs = {id(t) for t in flat if isinstance(t, torch.Tensor)}
    created: list[torch.Tensor] = []

    def wrap(value: Any) -> Any:
        if not isinstance(value, torch.Tensor) or isinstance(value, DeviceTensor) \
                or id(value) in inputs:
            return value
        wrapped = as_device(value, device)
        created.append(wrapped)
        return wrapped

    out = tree_map(wrap, out)
    state.work_done_ns = now_ns()
    state.busy = state.busy or rules.keeps_busy(func)
    rules.check_outputs(func, created, device)
    return out
