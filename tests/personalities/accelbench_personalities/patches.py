"""Every attribute a personality replaces, so that :func:`restore` can put torch back (the
in-process fixture installs a personality for one test and must leave the process as it was)."""

from __future__ import annotations

import contextlib
from typing import Any

_MISSING = object()
_undo: list[tuple[Any, str, Any]] = []


def replace(owner: Any, name: str, value: Any) -> None:
    """``owner.name = value``, remembered. torch's cached functions carry ``__wrapped__``, which
    dynamo reads (``torch.backends.mps.is_available.__wrapped__``): the replacement gets one."""
    original = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) \
        else getattr(owner, name, _MISSING)
    if original is not _MISSING and hasattr(original, "__wrapped__") and callable(value):
        with contextlib.suppress(AttributeError):
            value.__wrapped__ = value
    _undo.append((owner, name, original))
    setattr(owner, name, value)


def remove(owner: Any, name: str) -> None:
    """``del owner.name``, remembered (a torch without that API)."""
    original = getattr(owner, name, _MISSING)
    if original is _MISSING:
        return
    _undo.append((owner, name, original))
    delattr(owner, name)


def restore() -> None:
    while _undo:
        owner, name, original = _undo.pop()
        if original is _MISSING:
            if hasattr(owner, name):
                delattr(owner, name)
        else:
            setattr(owner, name, original)
