"""Feature probes: which features work on each device, which fail, give wrong numbers or are slow.

The package has three parts:

- this module: the contract between a feature and the engine (:class:`Feature`, :class:`Trial`,
  :class:`Result`), the tolerances, seeded inputs, and two observers shared by both sides (which
  aten ops ran; which ops torch says fell back to the CPU);
- ``features.py``: the features themselves and the registry;
- ``engine.py``: runs each feature on a device with its global state kept, compares with the CPU
  reference, times it;
- ``work.py``: ``probe``'s per-case work for the driver (one device a case, in a worker process
  that a crashing feature costs only its own cell) and the ``probe`` RunRecord.

A feature is a small function of a torch device string returning a :class:`Trial`; it raises when
the feature does not work. Its reference is computed independently, in float64 or complex128 on
the CPU, from the same seeded inputs. A feature declares the device kinds it applies to, so no
probe asks which device it runs on.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: ``crashed`` and ``timeout``: the feature killed its worker process or overran the timeout.
STATUSES = ("works", "fails", "wrong", "slower", "crashed", "timeout")
Reference = torch.Tensor | dict[str, torch.Tensor]

#: Largest allowed error of a result, relative to the reference's largest magnitude, per dtype:
#: about ten times the rounding error a correct kernel shows on the probes' small inputs.
TOLERANCE: dict[torch.dtype, float] = {
    torch.float64: 1e-9, torch.complex128: 1e-9,
    torch.float32: 1e-4, torch.complex64: 1e-4,
    torch.float16: 1e-2, torch.complex32: 1e-2,
    torch.bfloat16: 5e-2,
}


@dataclass(frozen=True)
class Result:
    """One tensor a feature produced, checked against the feature's reference."""

    label: str
    value: torch.Tensor
    tolerance: float


@dataclass
class Trial:
    """What one feature produced on one device."""

    results: list[Result] = field(default_factory=list)
    #: Repeated by the engine to time the feature (on the device and, for accelerators, the CPU).
    op: Callable[[], Any] | None = None
    #: The same work without the feature, timed on the same device for the detail text.
    baseline: Callable[[], Any] | None = None
    baseline_name: str = ""
    #: Set when the feature ran without an error but did not do its job: the cell then fails.
    failure: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Feature:
    name: str
    summary: str
    run: Callable[[str], Trial]
    #: The float64 / complex128 CPU result every Result of the Trial is compared with, or one
    #: per Result label when the Trial's results are different quantities.
    reference: Callable[[], Reference] | None = None
    #: Device kinds the feature applies to; empty means every kind.
    kinds: tuple[str, ...] = ()
    #: Whether an accelerator's time is compared with the CPU's (``slower`` cells).
    timed: bool = True
    group: str = ""

    def applies_to(self, kind: str) -> bool:
        return not self.kinds or kind in self.kinds


#: Features a user's file added with ``register_feature`` (``probe --feature-file``).
_USER_FEATURES: list[Feature] = []


def register_feature(feature: Feature) -> Feature:
    """Add a feature of your own to ``probe`` (call it from a file given with --feature-file)."""
    from accelbench.errors import UsageError

    if any(known.name == feature.name for known in _USER_FEATURES):
        raise UsageError(f"feature {feature.name!r} is registered twice; give it another name")
    _USER_FEATURES.append(feature)
    return feature


def user_features() -> list[Feature]:
    return list(_USER_FEATURES)


def result(value: torch.Tensor, label: str = "", tolerance: float | None = None) -> Result:
    """A Result with the tolerance of its dtype unless one is given."""
    tol = TOLERANCE.get(value.dtype, TOLERANCE[torch.float32]) if tolerance is None else tolerance
    return Result(label or str(value.dtype).removeprefix("torch."), value, tol)


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Seeded inputs made in float64 on the CPU, so the reference sees exactly the device's inputs."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype)


@contextlib.contextmanager
def every_warning() -> Iterator[list[warnings.WarningMessage]]:
    """Record every warning raised inside, torch's once-per-process ones included.

    torch emits some warnings once per process (TORCH_WARN_ONCE, the MPS CPU-fallback warning
    among them): without ``torch.set_warn_always(True)`` only the first probe would see one and
    every later feature that falls back would read "works".
    """
    previous = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield caught
    finally:
        torch.set_warn_always(previous)


@contextlib.contextmanager
def seeded(seed: int = 0) -> Iterator[None]:
    """Build modules with the same weights every time without touching the global generator."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


class OpRecorder(TorchDispatchMode):
    """Records the names of the aten ops dispatched inside it (``_transformer_encoder_layer_fwd``).

    A dispatch mode, unlike a torch-function mode, does not make ``has_torch_function`` true, so
    it does not itself switch off fast paths that check for it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


#: The C++ source location torch appends to its warnings: noise in a one-line detail.
_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")


def message_text(message: object) -> str:
    """A warning's or error's text without torch's C++ source location."""
    return _TRIGGERED.sub("", str(message)).strip()


def first_statement(lines: Iterable[str]) -> str:
    """The first non-empty line, joined with the next ones while a line ends with ':' (torch's
    way of announcing the cause on the next line: ``backend='x' raised:`` / ``... because:``)."""
    text = ""
    for line in (line.strip() for line in lines):
        if line:
            text = f"{text} {line}".strip()
            if not line.endswith(":"):
                break
    return text


#: torch's words when an op has no kernel for MPS: a warning when PYTORCH_ENABLE_MPS_FALLBACK=1
#: sends it to the CPU, a NotImplementedError otherwise.
_FALLBACK = re.compile(r"The operator '([^']+)' is not currently (?:supported|implemented) "
                       r"(?:on|for) the MPS")


def fallback_ops(messages: Iterable[str]) -> list[str]:
    """The ops named by MPS fallback warnings or errors, in first-seen order, without repeats."""
    found: dict[str, None] = {}
    for message in messages:
        for match in _FALLBACK.finditer(message):
            found.setdefault(match.group(1))
    return list(found)
