"""Run features on devices: each in isolation, checked against its CPU reference, timed.

A cell's status is decided in this order: ``fails`` (the feature raised or did not do its job),
``wrong`` (a result is further from the float64 CPU reference than its tolerance), ``slower``
(an accelerator took longer than the CPU for the same work), else ``works``. A feature that kills
its worker process or overruns the timeout is ``crashed`` or ``timeout`` (see ``probes/work.py``).

Every feature runs under ``run``'s fp32 precision settings (``devices/numerics.py``: every TF32
switch off, cudnn.benchmark off), which are restored after it with the rest of the global state
a feature may change. torch's own default lets cuDNN convolutions run TF32 on Ampere and later,
whose error (~5e-4) would call channels_last and complex convolutions ``wrong`` against the fp32
tolerance (1e-4). A feature about another precision sets it itself, inside.
"""

from __future__ import annotations

import contextlib
import math
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from accelbench.devices import Device
from accelbench.devices.numerics import get_precision, precision_settings
from accelbench.measure.loop.clock import synced_seconds
from accelbench.probes import (
    Feature,
    Reference,
    Result,
    Trial,
    every_warning,
    fallback_ops,
    first_statement,
    message_text,
)
from accelbench.results import DeviceProbe, ProbeCell

#: An accelerator is called slower only when it takes this much longer than the CPU, so that a
#: tie within timing noise is not reported as a finding.
SLOWER_MARGIN = 1.05
REPEATS = 5
#: Each timed repeat runs the op enough times to last this long, so timer resolution and
#: synchronisation cost do not dominate fast ops.
MIN_REPEAT_S = 0.005
MAX_NUMBER = 1000
#: The median repeat this much slower than the best one marks a timing as noisy (a loaded
#: machine); the best is still reported, flagged.
NOISY_SPREAD = 1.5

#: A device's progress: (the feature about to run, features done, features in all).
Progress = Callable[[str, float, "float | None"], None]


@dataclass
class Cell:
    """One feature on one device."""

    status: str
    detail: str = ""
    #: Device time / CPU time for the same op (above 1: the device is slower); None when untimed.
    ratio: float | None = None
    seconds: float = 0.0
    traceback: str = field(default="", repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "detail": self.detail, "ratio": self.ratio,
                "seconds": round(self.seconds, 4)}


def first_line(error: BaseException) -> str:
    """``Type: message``, on one line."""
    text = first_statement(message_text(error).splitlines())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def relative_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    """Largest |value - reference| over the reference's largest magnitude; inf for NaN or Inf."""
    wide = torch.complex128 if value.is_complex() or reference.is_complex() else torch.float64
    got, want = value.detach().to("cpu").to(wide), reference.detach().to("cpu").to(wide)
    if got.shape != want.shape:
        raise ValueError(f"result shape {tuple(got.shape)} differs from the reference's "
                         f"{tuple(want.shape)}")
    if not bool(torch.isfinite(got).all()):
        return math.inf
    scale = want.abs().max().item() if want.numel() else 0.0
    return (got - want).abs().max().item() / (scale or 1.0)


@dataclass(frozen=True)
class OpSeconds:
    """Seconds per call of one op over the timed stretches: the best and the median (not the
    step loop's samples, ``measure/loop/timing.py``)."""

    best: float
    median: float

    @property
    def noisy(self) -> bool:
        return self.median > NOISY_SPREAD * self.best


def time_op(op: Callable[[], Any], device: Device, repeats: int = REPEATS) -> OpSeconds:
    """Seconds per call of ``op``, synchronising ``device`` around every timed stretch."""
    op()  # warm-up: first calls allocate memory, pick kernels and compile
    device.synchronize()

    def stretch(number: int) -> float:
        return synced_seconds(device, op, number)

    # Like timeit's autorange: enough calls per stretch that it lasts MIN_REPEAT_S.
    number, elapsed = 1, stretch(1)
    while elapsed < MIN_REPEAT_S and number < MAX_NUMBER:
        number *= 10
        elapsed = stretch(number)
    samples = sorted([elapsed / number] + [stretch(number) / number for _ in range(repeats - 1)])
    return OpSeconds(samples[0], samples[len(samples) // 2])


def _format_seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _versus(mine: OpSeconds, theirs: OpSeconds, other: str) -> str:
    ratio = mine.best / theirs.best
    words = f"{ratio:.2f}x slower than" if ratio > 1 else f"{1 / ratio:.2f}x faster than"
    noisy = ", noisy" if mine.noisy or theirs.noisy else ""
    return (f"{words} {other} ({_format_seconds(mine.best)} vs {_format_seconds(theirs.best)}"
            f"{noisy})")


def _check(results: list[Result], reference: Reference) -> tuple[bool, str]:
    """(all within tolerance, the worst result's error in words)."""
    def wanted(label: str) -> torch.Tensor:
        if not isinstance(reference, dict):
            return reference
        if label not in reference:
            raise KeyError(f"the reference has no {label!r} (it has {', '.join(reference)})")
        return reference[label]

    errors = [(relative_error(r.value, wanted(r.label)), r) for r in results]
    error, worst = max(errors, key=lambda pair: pair[0] / pair[1].tolerance)
    within = all(e <= r.tolerance for e, r in errors)
    relation = "<=" if within else ">"
    label = f" ({worst.label})" if len(results) > 1 or within is False else ""
    return within, f"max err {error:.1e} {relation} tol {worst.tolerance:.0e}{label}"


def _cpu_ratio(feature: Feature, device_op: Callable[[], Any], device: Device,
               cpu: Device) -> tuple[float | None, str]:
    """Device time over CPU time for the feature's op; the CPU runs the feature afresh."""
    try:
        cpu_op = feature.run(cpu.torch_device).op
    except Exception as error:
        return None, f"no CPU time to compare: the CPU fails ({first_line(error)})"
    if cpu_op is None:
        return None, ""
    mine, theirs = time_op(device_op, device), time_op(cpu_op, cpu)
    return mine.best / theirs.best, _versus(mine, theirs, "the CPU")


def _evaluate(feature: Feature, trial: Trial, device: Device, cpu: Device,
              reference: Callable[[], Reference] | None) -> Cell:
    if trial.failure:
        return Cell("fails", "; ".join([trial.failure, *trial.notes]))
    parts, status, ratio = [], "works", None
    if trial.results:
        if reference is None:
            raise RuntimeError(f"feature {feature.name!r} returned results but has no reference")
        within, words = _check(trial.results, reference())
        parts.append(words)
        status = "works" if within else "wrong"
    if trial.op is not None and feature.timed and not device.is_cpu:
        ratio, words = _cpu_ratio(feature, trial.op, device, cpu)
        parts.append(words)
        if status == "works" and ratio is not None and ratio > SLOWER_MARGIN:
            status = "slower"
            parts.insert(0, parts.pop())  # the finding first
    if trial.op is not None and trial.baseline is not None:
        parts.append(_versus(time_op(trial.op, device), time_op(trial.baseline, device),
                             trial.baseline_name))
    return Cell(status, "; ".join(p for p in [*parts, *trial.notes] if p), ratio)


@contextlib.contextmanager
def _global_state_kept(device: Device) -> Iterator[None]:
    """The feature runs in fp32 as ``run`` has it, and one that fails half-way does not change
    the conditions of the next: the precision switches (matmul precision, cuDNN's and the
    device's TF32 switches, cudnn.benchmark), the default dtype and grad mode are put back."""
    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    with precision_settings(get_precision("fp32"), device):
        try:
            yield
        finally:
            torch.set_default_dtype(dtype)
            torch.set_grad_enabled(grad)


def probe_feature(feature: Feature, device: Device, cpu: Device,
                  reference: Callable[[], Reference] | None = None) -> Cell:
    """Run one feature on one device; every exception becomes a ``fails`` cell."""
    reference = reference or feature.reference
    start = time.perf_counter()
    # The settings first: a torch that deprecates an old switch warns about it, not the feature.
    with _global_state_kept(device), every_warning() as caught:
        try:
            trial = feature.run(device.torch_device)
            device.synchronize()
            cell = _evaluate(feature, trial, device, cpu, reference)
        except Exception as error:
            cell = Cell("fails", first_line(error), traceback=traceback.format_exc(limit=10))
    messages = list(dict.fromkeys(message_text(w.message) for w in caught))
    notes = []
    fell_back = fallback_ops(messages)
    if fell_back:
        notes.append(f"ran on the CPU via fallback: {', '.join(fell_back)}")
    if cell.status == "fails" and messages:
        notes.append(f"torch warned: {first_statement(messages[0].splitlines())}")
    cell.detail = "; ".join([cell.detail, *notes]) if cell.detail else "; ".join(notes)
    cell.seconds = time.perf_counter() - start
    return cell


class References:
    """Each feature's reference, computed once and shared by every device."""

    def __init__(self) -> None:
        self._values: dict[str, Reference] = {}

    def of(self, feature: Feature) -> Callable[[], Reference] | None:
        compute = feature.reference
        if compute is None:
            return None

        def cached() -> Reference:
            if feature.name not in self._values:
                self._values[feature.name] = compute()
            return self._values[feature.name]
        return cached


def probe_device(device: Device, features: list[Feature], cpu: Device,
                 progress: Progress | None = None, references: References | None = None,
                 on_cell: Callable[[str, Cell], None] | None = None) -> dict[str, Cell]:
    """Every feature that applies to the device's kind, in order; ``progress`` gets the feature
    about to run (its name as the phase), ``on_cell`` each cell as it is done."""
    references = references or References()
    applicable = [feature for feature in features if feature.applies_to(device.kind)]
    cells: dict[str, Cell] = {}
    for done, feature in enumerate(applicable):
        if progress is not None:
            progress(feature.name, done, len(applicable))
        cells[feature.name] = probe_feature(feature, device, cpu, references.of(feature))
        if on_cell is not None:
            on_cell(feature.name, cells[feature.name])
    return cells


def _device_name(device: Device) -> str:
    try:
        return str(device.info().get("name", device.name))
    except Exception as error:  # describing the device is not worth failing the probe over
        return f"{device.name} ({type(error).__name__})"


def device_probe(device: Device, cells: dict[str, Cell]) -> DeviceProbe:
    return DeviceProbe(device=device.name, device_name=_device_name(device),
                       threads=torch.get_num_threads(),
                       cells={name: ProbeCell(**cell.to_dict()) for name, cell in cells.items()})
