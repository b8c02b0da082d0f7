"""The JSON form of the options, derived from their dataclass fields: one codec for every options
dataclass (RunOptions, StopRule, CheckOptions, ProbeOptions, ScaleOptions, Rendezvous), so a field
added to one of them is carried to a worker process and into the record without anyone listing
it (a hand-written list once dropped ``prompt_lens`` and ``new_tokens``). At the bottom of the
layers, so the stop rule (``measure/``) and any other layer's dataclass can derive it too.

A field whose ``metadata`` says ``{"stored": False}`` (a display switch such as ``--debug``'s
echo) is left out of the dict and takes its default when read back.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def _stored(spec: dataclasses.Field[Any]) -> bool:
    return bool(spec.metadata.get("stored", True))


def encode(value: Any) -> Any:
    """A JSON value for an option's value: dataclasses as dicts of their stored fields, tuples
    as lists, paths as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {spec.name: encode(getattr(value, spec.name))
                for spec in dataclasses.fields(value) if _stored(spec)}
    if isinstance(value, tuple | list):
        return [encode(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def decode(kind: Any, value: Any) -> Any:
    """The value of type ``kind`` (a field's resolved annotation) that ``encode`` wrote as
    ``value``."""
    if value is None:
        return None
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        arms = [arm for arm in typing.get_args(kind) if arm is not type(None)]
        return decode(arms[0], value) if len(arms) == 1 else value
    if origin is tuple:
        item = typing.get_args(kind)[0]
        return tuple(decode(item, element) for element in value)
    if kind is Path:
        return Path(value)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return from_dict(kind, value)
    return value


def to_dict(options: Any) -> dict[str, Any]:
    """``options`` (an options dataclass) as a dict of JSON values."""
    encoded = encode(options)
    assert isinstance(encoded, dict)
    return encoded


def from_dict(kind: type[T], data: dict[str, Any]) -> T:
    """The ``kind`` that :func:`to_dict` wrote as ``data``; a field missing from ``data`` takes
    its default (a record written before the field existed), a key that is no field is an
    error (it would be dropped without a word)."""
    specs = {spec.name: spec for spec in dataclasses.fields(kind)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(specs))
    if unknown:
        raise ValueError(f"{kind.__name__} has no field {', '.join(map(repr, unknown))}; its "
                         f"fields: {', '.join(specs)}")
    hints = typing.get_type_hints(kind)
    return kind(**{name: decode(hints[name], value) for name, value in data.items()
                   if _stored(specs[name])})


class Codec:
    """``to_dict`` and ``from_dict`` for an options dataclass, derived from its fields."""

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        return from_dict(cls, data)
