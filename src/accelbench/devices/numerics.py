"""The torch side of a case's numeric precision (the table itself, torch-free, is
``devices/precisions.py``): dtypes, autocast, the gradient scaler, and the switches that decide
whether fp32 products and convolutions run in TF32, applied the same way on every device.

torch's own defaults are mixed (matmul "highest" but ``torch.backends.cudnn.allow_tf32 = True``),
so a convolution labelled fp32 would run TF32 on Ampere and later: :func:`precision_settings` sets
every switch for every case (``run``, ``check``, ``probe``, ``scale`` and the peak alike) and
restores them afterwards; :func:`backend_flags` records them.

Which switches govern the kernels depends on torch. Up to 2.8 they are the fp32 matmul precision
(cuBLAS, and oneDNN's matmul) and ``torch.backends.cudnn.allow_tf32`` (cuDNN convolutions and
RNNs). From 2.9 each back end and op has its own ``fp32_precision`` ("ieee", "tf32", or "none" =
inherit from ``<backend>.fp32_precision`` and then ``torch.backends.fp32_precision``), and cuBLAS,
cuDNN and oneDNN read those: ``cudnn.allow_tf32 = False`` only sets conv and rnn to "none", which
still gives TF32 when a parent says "tf32". So on a torch that has them every op is set explicitly
as well, and the old switches are kept consistent with them (torch raises when asked for an old
switch that contradicts the new ones). A device kind with a switch of its own that none of these
reach (XPU: oneDNN's TF32 switch) sets it through its adapter when the case's device is given.

``cudnn.benchmark`` (cuDNN tries the algorithms for each new input shape and keeps the fastest)
is set here too: on for ``run``, ``sweep`` and ``scale`` unless ``--no-cudnn-benchmark``, off for
``check`` and ``probe`` (the default), which judge numbers rather than speed.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from accelbench.devices.base import Device
from accelbench.devices.precisions import PRECISION_SPECS, PrecisionSpec, precision_spec


@dataclass(frozen=True)
class Precision:
    name: str
    param_dtype: torch.dtype = torch.float32
    autocast_dtype: torch.dtype | None = None
    grad_scaler: bool = False
    matmul: str = "highest"

    @property
    def tf32(self) -> bool:
        """TF32 for fp32 matmuls and cuDNN convolutions (only the ``tf32`` precision)."""
        return self.matmul != "highest"


def _with_dtypes(spec: PrecisionSpec) -> Precision:
    autocast_dtype = getattr(torch, spec.autocast_dtype) if spec.autocast_dtype else None
    return Precision(spec.name, getattr(torch, spec.param_dtype), autocast_dtype, spec.grad_scaler,
                     spec.matmul)


PRECISIONS: dict[str, Precision] = {name: _with_dtypes(spec) for name, spec in PRECISION_SPECS.items()}


def get_precision(name: str) -> Precision:
    return PRECISIONS[precision_spec(name).name]


def prepare_model(model: nn.Module, precision: Precision, channels_last: bool) -> nn.Module:
    if precision.param_dtype != torch.float32:
        model = model.to(precision.param_dtype)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def prepare_batch(batch: tuple[torch.Tensor, ...], precision: Precision,
                  channels_last: bool) -> tuple[torch.Tensor, ...]:
    out = []
    for tensor in batch:
        if tensor.is_floating_point() and tensor.dtype != precision.param_dtype:
            tensor = tensor.to(precision.param_dtype)
        if channels_last and tensor.dim() == 4:
            tensor = tensor.contiguous(memory_format=torch.channels_last)
        out.append(tensor)
    return tuple(out)


def autocast(device: Device, precision: Precision) -> contextlib.AbstractContextManager[object]:
    if precision.autocast_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.torch_device.split(":")[0],
                          dtype=precision.autocast_dtype)


def grad_scaler(device: Device, precision: Precision) -> torch.amp.GradScaler | None:
    if not precision.grad_scaler:
        return None
    return torch.amp.GradScaler(device.torch_device.split(":")[0])


#: The per-op switches of torch >= 2.9, as (backends module, op, name in backend_flags).
_FINE_SWITCHES = (("cuda", "matmul", "cuda_matmul_fp32_precision"),
                  ("cudnn", "conv", "cudnn_conv_fp32_precision"),
                  ("cudnn", "rnn", "cudnn_rnn_fp32_precision"),
                  ("mkldnn", "matmul", "mkldnn_matmul_fp32_precision"),
                  ("mkldnn", "conv", "mkldnn_conv_fp32_precision"),
                  ("mkldnn", "rnn", "mkldnn_rnn_fp32_precision"))
_FINE_VALUES = ("ieee", "tf32", "bf16", "none")


def _fine_switches() -> list[tuple[Any, str]]:
    """(the op's switch object, its backend_flags name) for every per-op fp32_precision switch;
    empty on a torch without them, or with the vocabulary of the main branch before 2.9 (which
    said "default" and had no "ieee")."""
    found = []
    for module, op, name in _FINE_SWITCHES:
        switch = getattr(getattr(torch.backends, module, None), op, None)
        try:
            value = switch.fp32_precision if switch is not None else None
        except (AttributeError, RuntimeError):
            value = None
        if value not in _FINE_VALUES:
            return []
        found.append((switch, name))
    return found


def _read(getter: Callable[[], Any]) -> Any:
    """A switch's value, or None when torch refuses to say (an old switch that contradicts the
    per-op ones raises rather than answer)."""
    try:
        return getter()
    except RuntimeError:
        return None


@dataclass(frozen=True)
class _Saved:
    matmul: str | None
    cudnn_tf32: bool | None
    benchmark: bool
    fine: tuple[tuple[Any, str, str], ...]
    wide: tuple[tuple[Any, str], ...]


#: Where a per-op switch (by its module in _FINE_SWITCHES) inherits from when it says "none":
#: its back end's own switch (cuBLAS and cuDNN both read ``torch.backends.cudnn.fp32_precision``,
#: torch's "cuda" back end), which inherits from ``torch.backends.fp32_precision``.
_WIDE_SWITCHES = {"cuda": "cudnn", "cudnn": "cudnn", "mkldnn": "mkldnn"}


def _wide_switches() -> list[Any]:
    """torch's switch and each back end's, parents first; empty without per-op switches."""
    if not _fine_switches():
        return []
    modules = [torch.backends] + [getattr(torch.backends, name)
                                  for name in dict.fromkeys(_WIDE_SWITCHES.values())]
    return [module for module in modules
            if _read(functools.partial(getattr, module, "fp32_precision")) is not None]


def _set_wide(module: Any, value: str) -> None:
    if module is torch.backends.mkldnn:
        # torch (2.9 to 2.14 at least) wires ``torch.backends.mkldnn.fp32_precision = v`` to
        # torch's own switch, not oneDNN's: set_flags reaches oneDNN's.
        module.set_flags(_fp32_precision=value)
    else:
        module.fp32_precision = value


def _parent_value(module: str) -> str:
    return str(getattr(torch.backends, _WIDE_SWITCHES[module]).fp32_precision)


def _save() -> _Saved:
    return _Saved(_read(torch.get_float32_matmul_precision),
                  _read(lambda: bool(torch.backends.cudnn.allow_tf32)),
                  bool(torch.backends.cudnn.benchmark),
                  tuple((switch, switch.fp32_precision, name.split("_")[0])
                        for switch, name in _fine_switches()),
                  tuple((module, module.fp32_precision) for module in _wide_switches()))


def _restore(saved: _Saved) -> None:
    # The old switches first: setting them also sets some per-op ones, which are then put back.
    # torch reads a per-op switch resolved (a "none" that inherits "tf32" reads "tf32"), so each
    # is put back as "none" where it reads as its parent does: every switch reads as before, and
    # one that inherited goes on inheriting (a later change of torch's switch still reaches it).
    if saved.matmul is not None:
        torch.set_float32_matmul_precision(saved.matmul)
    if saved.cudnn_tf32 is not None:
        torch.backends.cudnn.allow_tf32 = saved.cudnn_tf32
    torch.backends.cudnn.benchmark = saved.benchmark
    for index, (module, value) in enumerate(saved.wide):
        inherited = index > 0 and value == saved.wide[0][1]
        _set_wide(module, "none" if inherited else value)
    for switch, value, module in saved.fine:
        switch.fp32_precision = "none" if saved.wide and value == _parent_value(module) else value


def _apply(precision: Precision, cudnn_benchmark: bool) -> None:
    torch.set_float32_matmul_precision(precision.matmul)
    torch.backends.cudnn.allow_tf32 = precision.tf32
    torch.backends.cudnn.benchmark = cudnn_benchmark
    for switch, _ in _fine_switches():
        switch.fp32_precision = "tf32" if precision.tf32 else "ieee"


def _nothing_to_put_back() -> None:
    return None


@contextlib.contextmanager
def precision_settings(precision: Precision, device: Device | None = None, *,
                       cudnn_benchmark: bool = False) -> Iterator[None]:
    """Set every switch that decides whether fp32 products and convolutions run in TF32, and
    ``cudnn.benchmark``, for the case; restore them all after.

    The switches are process-wide and read by kernels at launch, so everything the case runs
    (``run``'s warm-up and steps, ``check``'s candidate, a probe's feature, a scale rank's
    steps) must happen inside this block. ``device`` adds the switches of its own kind (XPU's
    oneDNN switch); without it, only torch's device-wide ones are set.
    """
    saved = _save()
    put_back = _nothing_to_put_back
    try:
        _apply(precision, cudnn_benchmark)
        if device is not None:
            put_back = device.adapter.allow_tf32(precision.tf32)
        yield
    finally:
        put_back()
        _restore(saved)



def switches_as_now() -> Callable[[], None]:
    """A function that puts every switch :func:`backend_flags` reads back as it is now: a reused
    worker process gives each case the switches a fresh process starts with (engine/launchers/
    fresh.py), whatever the case before set and left."""
    saved, matmul, cudnn = _save(), torch.backends.cuda.matmul, torch.backends.cudnn
    others = (bool(cudnn.deterministic), torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled(),
              bool(matmul.allow_fp16_reduced_precision_reduction),
              bool(matmul.allow_bf16_reduced_precision_reduction))

    def put_back() -> None:
        _restore(saved)
        deterministic, algorithms, warn_only, fp16, bf16 = others
        cudnn.deterministic = deterministic
        torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
        matmul.allow_fp16_reduced_precision_reduction = fp16
        matmul.allow_bf16_reduced_precision_reduction = bf16
    return put_back

def backend_flags(device: Device | None = None) -> dict[str, str | bool]:
    """The global numeric switches in force now (call it inside :func:`precision_settings`), for
    the result: they decide whether an "fp32" figure is fp32, whether it is reproducible and,
    for cudnn_benchmark, how the convolutions were chosen. With ``device``, its kind's own
    switches too. A switch torch will not read out (contradicting another) is left out."""
    matmul = torch.backends.cuda.matmul
    flags: dict[str, Any] = {
        "float32_matmul_precision": _read(torch.get_float32_matmul_precision),
        "cuda_matmul_allow_tf32": _read(lambda: bool(matmul.allow_tf32)),
        "cudnn_allow_tf32": _read(lambda: bool(torch.backends.cudnn.allow_tf32)),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "cuda_matmul_fp16_reduced_precision_reduction":
            bool(matmul.allow_fp16_reduced_precision_reduction),
        "cuda_matmul_bf16_reduced_precision_reduction":
            bool(matmul.allow_bf16_reduced_precision_reduction),
    }
    # What cuBLAS, cuDNN and oneDNN read from torch 2.9 on ("none" inherits; resolved here).
    flags.update({name: str(switch.fp32_precision) for switch, name in _fine_switches()})
    if device is not None:
        flags.update(device.adapter.tf32_flags())
    return {name: value for name, value in flags.items() if value is not None}


def unsupported_reason(device: Device, precision: Precision) -> str | None:
    """Try the precision's basic operations on the device; None when they work."""
    kind = device.torch_device.split(":")[0]
    try:
        if precision.autocast_dtype is not None:
            if not torch.amp.is_autocast_available(kind):
                return f"autocast is not available on device type {kind!r}"
            with torch.autocast(device_type=kind, dtype=precision.autocast_dtype):
                torch.ones(4, 4, device=device.torch_device) @ torch.ones(4, 4,
                                                                          device=device.torch_device)
        dtype = precision.param_dtype
        x = torch.ones(4, 4, device=device.torch_device, dtype=dtype)
        (x @ x).sum().item()
    except Exception as error:  # the device's own words are the reason
        return f"{precision.name} on {device.name}: {type(error).__name__}: {error}".splitlines()[0]
    return None
