"""How tensors get onto the emulated device, and what runs around them.

- ``Tensor.to("cuda")`` (no index) resolves the current device through CUDA before any dispatch,
  ``.to("mps")`` fails on Linux the same way, and ``torch.tensor(data, device=...)`` places its
  result before dispatch too: ``Tensor.to``, ``.cuda``, ``torch.tensor`` and ``torch.as_tensor``
  are replaced (at class level: every thread sees them). Factories (``torch.randn(...,
  device="cuda")``, ``torch.full(..., device=x.device)``) are caught by :class:`PlacementMode`, a
  dispatch mode pushed on the main thread at install.
- ``torch.autocast("cuda")`` only casts tensors with CUDA's autocast key; on these C++-CPU
  tensors the same casts come from entering CPU autocast alongside (:func:`patch_autocast`).
  The CPU's autocast op lists are close to CUDA's, not identical.
- ``torch.compile``: with the mode on the stack dynamo runs every frame eagerly (see
  :class:`PlacementMode`), through DeviceTensor's dispatch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from accelbench_personalities import journal
from accelbench_personalities.emulated import (
    CPU,
    DeviceTensor,
    Rules,
    as_device,
    aten,
    is_emulated,
    memory,
    normalize,
    run_on_device,
    state,
    to_host,
)
from accelbench_personalities.patches import replace


class PlacementMode(TorchDispatchMode):
    """Catches ops told to put their result on the emulated device (factories, ``_to_copy``);
    everything else passes through (ops on device tensors then reach DeviceTensor).

    While it is on the mode stack dynamo skips every frame (torch.compile runs the function
    eagerly, through DeviceTensor), except inside this handler, where torch pops the mode: that
    is why torch wraps a mode's handler in ``dynamo.disable``. Done at class creation it imports
    dynamo (a second) in every process; here it is done by the first ``torch.compile``."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if is_emulated(kwargs.get("device")):
            return run_on_device(func, args, kwargs)
        return func(*args, **kwargs)


def _guard_compile(compile_: Callable[..., Any]) -> Callable[..., Any]:
    def compile(*args: Any, **kwargs: Any) -> Any:
        handler = PlacementMode.__dict__["__torch_dispatch__"]
        if not getattr(handler, "_personality_untraced", False):
            import torch._dynamo

            untraced = torch._dynamo.disable(handler, recursive=True)
            untraced._personality_untraced = True
            replace(PlacementMode, "__torch_dispatch__", untraced)
        # What was asked of torch.compile (frames then run eagerly here): the tests read the
        # mode and fullgraph a recipe passed (issue 33), as on a real GPU.
        journal.write("compile", backend=str(kwargs.get("backend", "inductor")),
                      mode=kwargs.get("mode"), fullgraph=bool(kwargs.get("fullgraph", False)),
                      frames=journal.accelbench_frames())
        # Here dynamo skips every frame (the placement mode is on the stack), which fullgraph
        # turns into an error ("found no compiled frames"): the request is journalled above and
        # the frames run eagerly, as every compiled frame does under a personality.
        kwargs.pop("fullgraph", None)
        return compile_(*args, **kwargs)
    compile.__wrapped__ = compile_  # type: ignore[attr-defined]
    return compile


# --- Tensor.to / .cuda / pinning, replaced at class level ---------------------------------------
_original_to = torch.Tensor.to
_original_cuda = torch.Tensor.cuda


def _to(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    copy = bool(kwargs.pop("copy", False))
    device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
    options: dict[str, Any] = {"non_blocking": non_blocking, "copy": copy}
    if memory_format is not None:
        options["memory_format"] = memory_format
    source = self._device if isinstance(self, DeviceTensor) else None
    target = normalize(device) if device is not None else None
    if target is None or target == source:
        return _original_to(self, None, dtype, **options)
    if not is_emulated(target):
        if source is None:
            return _original_to(self, *args, copy=copy, **kwargs)
        extra = {"dtype": dtype} if dtype is not None else {}
        if memory_format is not None:
            extra["memory_format"] = memory_format
        return to_host(self, **extra)  # type: ignore[arg-type]
    if source is None:  # host -> device: a copy, as CUDA's is
        host = _original_to(self, CPU, dtype, **{**options, "copy": True})
    else:  # one device -> another
        host = to_host(self, **({"dtype": dtype} if dtype is not None else {}))  # type: ignore[arg-type]
    out = as_device(host, target)
    state.rules.check_outputs(aten._to_copy.default, [out], target)
    return out


def _cuda(self: torch.Tensor, device: Any = None, non_blocking: bool = False,
          memory_format: torch.memory_format = torch.preserve_format) -> torch.Tensor:
    if state.rules.device_type != "cuda":
        return _original_cuda(self, device, non_blocking, memory_format=memory_format)
    index = device if isinstance(device, int) else (torch.device(device).index if device else None)
    return _to(self, torch.device("cuda", state.current_index if index is None else index),
               non_blocking=non_blocking, memory_format=memory_format)


def _pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
    if isinstance(self, DeviceTensor):
        raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
    out = self.clone()
    out._personality_pinned = True  # type: ignore[attr-defined]
    return out


def _is_pinned(self: torch.Tensor, device: Any = None) -> bool:
    return bool(getattr(self, "_personality_pinned", False))


def _from_data(make: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``torch.tensor(data, device=...)`` places its result before any dispatch: made on the
    CPU, then moved."""
    def from_data(*args: Any, **kwargs: Any) -> torch.Tensor:
        device = kwargs.get("device")
        if not is_emulated(device):
            return make(*args, **kwargs)
        requires_grad = bool(kwargs.pop("requires_grad", False))
        kwargs.pop("pin_memory", None)
        out = _to(make(*args, **{**kwargs, "device": CPU}), device)
        return out.requires_grad_(requires_grad) if requires_grad else out
    from_data.__wrapped__ = make  # type: ignore[attr-defined]
    return from_data


def patch_tensor_methods(pinning: bool) -> None:
    replace(torch, "tensor", _from_data(torch.tensor))
    replace(torch, "as_tensor", _from_data(torch.as_tensor))
    replace(torch.Tensor, "to", _to)
    replace(torch.Tensor, "cuda", _cuda)
    replace(torch, "compile", _guard_compile(torch.compile))
    if pinning:
        replace(torch.Tensor, "pin_memory", _pin_memory)
        replace(torch.Tensor, "is_pinned", _is_pinned)


# --- autocast -----------------------------------------------------------------------------------
def patch_autocast() -> None:
    """``torch.autocast(<device>)`` also enters CPU autocast with the same dtype: the tensors are
    CPU tensors to the dispatcher, so only CPU autocast can cast them."""
    autocast = torch.amp.autocast_mode.autocast
    enter: Callable[[Any], Any] = autocast.__enter__
    leave: Callable[..., Any] = autocast.__exit__

    def __enter__(self: Any) -> Any:  # noqa: N807
        result = enter(self)
        if self.device == state.rules.device_type:
            inner = torch.autocast("cpu", dtype=self.fast_dtype, enabled=self._enabled,
                                   cache_enabled=self._cache_enabled)
            inner.__enter__()
            self._personality_inner = inner
        return result

    def __exit__(self: Any, *exc: Any) -> Any:  # noqa: N807
        inner = self.__dict__.pop("_personality_inner", None)
        if inner is not None:
            inner.__exit__(*exc)
        return leave(self, *exc)

    replace(autocast, "__enter__", __enter__)
    replace(autocast, "__exit__", __exit__)


_modes: list[PlacementMode] = []


def install(rules: Rules, pinning: bool) -> None:
    """Make ``rules``' device exist in this process (tensors, placement, autocast)."""
    state.rules = rules
    patch_tensor_methods(pinning)
    patch_autocast()
    # Optimisers use their foreach (multi-tensor) kernels only for these types, as on a GPU.
    from torch.optim import optimizer
    from torch.utils import _foreach_utils

    for owner in (optimizer, _foreach_utils):
        replace(owner, "_foreach_supported_types",
                [*owner._foreach_supported_types, DeviceTensor])
    mode = PlacementMode()
    mode.__enter__()
    _modes.append(mode)
    journal.write("install", personality=type(rules).__name__)


def uninstall() -> None:
    """Leave the process as it was before :func:`install` (the patches are undone by the caller,
    patches.restore). Device tensors made meanwhile keep their class."""
    while _modes:
        _modes.pop().__exit__(None, None, None)
    state.rules, state.current_index, state.work_done_ns, state.busy = Rules(), 0, 0, False
    memory.__init__()  # type: ignore[misc]
