"""The one JSON codec of accelbench's dataclasses: options, worker specs, rank reports and the
stored result records all go to JSON and back through :func:`encode` and :func:`decode`, derived
from their fields and annotations, so a field added to any of them is carried, checked and read
back without anyone listing it. At the bottom of the layers, so every layer's dataclass can use it.

Reading checks every field against its annotation (``float | None``, ``list[int]``, ``tuple[str,
...]``, ``dict[str, ProbeCell]``, ``Path``, another dataclass) and names a bad field by its path
(``RunOptions.stop.value``, or in a result file ``cases[1].parity.tolerance.drift``). One switch
says what a key that is no field means:

- ``strict`` (specs, options, rank reports: written by this accelbench for itself): an error
  naming its path (``RunOptions.stop.bogus: StopRule has no field 'bogus'``): it would otherwise
  be dropped without a word;
- lenient (stored records: files from other versions): skipped, and its path appended to
  ``skipped`` so the caller can count it; keys a class declares in ``JSON_EXTRA`` (a block
  written for readers, such as a case's ``derived``) are expected and not counted.

A missing field takes its default (a file written before the field existed); a missing field
without one is an error. Per class: ``JSON_NAMES`` maps a field to its key where the two differ
(``pass`` is a Python keyword), ``JSON_ORDER`` lists fields that come first in the file (the order
older files have). Per field (``metadata``): ``{"stored": False}`` leaves it out (a display switch
such as ``--debug``'s echo; it takes its default when read back), ``{"codec": FieldCodec(...)}``
writes and reads a value that is not plain data (a device by its name, settings with their type),
``{"inline": True}`` writes a dataclass field's own fields into its parent's object (a record's
options: the run options' keys beside the kind's own), ``{"omit_none": True}`` writes the field
only where it is not None (a key some records of a kind have and others not).

``checked=False`` (reading a record's options: what ran, not what is to run) builds each
dataclass without its own checks (``__post_init__``), so a file whose value this accelbench no
longer accepts (a data folder of another machine, a precision since renamed) still loads; the
annotations are still checked.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from accelbench.errors import UsageError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
D = TypeVar("D", bound="DataclassInstance")


class DecodeError(UsageError, ValueError):
    """A dict that is not the dataclass it should be: one line naming the field by its path."""


class FieldCodec:
    """How one field's value is written and read where it is not plain data: ``decode`` gets the
    JSON value and the ``context`` the caller passed to :func:`decode` (a worker's devices).
    (Plain classes here, not dataclasses: this module is imported by every options module, and
    making a dataclass costs more than the rest of it.)"""

    __slots__ = ("decode", "encode")

    def __init__(self, encode: Callable[[Any], Any],
                 decode: Callable[[Any, Mapping[str, Any]], Any]) -> None:
        self.encode, self.decode = encode, decode


def _stored(spec: dataclasses.Field[Any]) -> bool:
    return bool(spec.metadata.get("stored", True))


def _inline(spec: dataclasses.Field[Any]) -> bool:
    return bool(spec.metadata.get("inline", False))


@functools.cache
def _keys(cls: type) -> frozenset[str]:
    """The keys an object of ``cls`` may hold: its fields' (an inline field's own keys) and
    ``JSON_EXTRA``."""
    names: dict[str, str] = getattr(cls, "JSON_NAMES", {})
    keys = set(getattr(cls, "JSON_EXTRA", ()))
    for spec in dataclasses.fields(cls):
        if _inline(spec):
            keys |= _keys(_hints(cls)[spec.name])
        else:
            keys.add(names.get(spec.name, spec.name))
    return frozenset(keys)


def field_path(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


# --- writing ------------------------------------------------------------------------------------
def encode(value: Any) -> Any:
    """The JSON form of ``value``: a dataclass as the dict of its stored fields (``JSON_NAMES``,
    ``JSON_ORDER``, a field's own ``codec``), tuples as lists, paths as strings, recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        names: dict[str, str] = getattr(cls, "JSON_NAMES", {})
        out = {}
        for spec in _ordered_fields(cls):
            if not _stored(spec):
                continue
            item = getattr(value, spec.name)
            if item is None and spec.metadata.get("omit_none"):
                continue
            if _inline(spec):
                out.update(encode(item))
                continue
            codec: FieldCodec | None = spec.metadata.get("codec")
            stored = encode(item) if codec is None or item is None else codec.encode(item)
            out[names.get(spec.name, spec.name)] = stored
        return out
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


@functools.cache
def _ordered_fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    specs = dataclasses.fields(cls)
    first: tuple[str, ...] = getattr(cls, "JSON_ORDER", ())
    rank = {name: index for index, name in enumerate(first)}
    return tuple(sorted(specs, key=lambda spec: rank.get(spec.name, len(rank))))


# --- reading ------------------------------------------------------------------------------------
class _Reading:
    """One reading: the switch, how an error names a field ("result field 'cases[0].status'",
    "field 'RunOptions.seed'"), where skipped keys go, and the fields' codecs' context."""

    __slots__ = ("checked", "context", "noun", "skipped", "strict")

    def __init__(self, strict: bool, noun: str, skipped: list[str] | None,
                 context: Mapping[str, Any], checked: bool = True) -> None:
        self.strict, self.noun, self.skipped, self.context = strict, noun, skipped, context
        self.checked = checked

    def wrong(self, value: Any, hint: Any, where: str) -> DecodeError:
        return DecodeError(f"{self.noun} {where!r} has the wrong type: {type(value).__name__} "
                           f"(expected {_expected(hint)})")

    def convert(self, value: Any, hint: Any, where: str) -> Any:
        """``value`` checked against ``hint``; dicts become the dataclasses the hint names."""
        if hint is Any:
            return value
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            return self._union(value, hint, where)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self.build(hint, value, where)
        if origin in (list, collections.abc.Sequence):
            if not isinstance(value, list | tuple):
                raise self.wrong(value, hint, where)
            (item,) = typing.get_args(hint)
            return [self.convert(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
        if origin is tuple:
            return self._tuple(value, hint, where)
        if origin in (dict, collections.abc.Mapping):
            if not isinstance(value, dict):
                raise self.wrong(value, hint, where)
            _, item = typing.get_args(hint)
            return {str(k): self.convert(v, item, field_path(where, str(k))) for k, v in value.items()}
        if hint is float:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return value
            raise self.wrong(value, hint, where)
        if hint is Path:
            if isinstance(value, str | Path):
                return Path(value)
            raise self.wrong(value, hint, where)
        if hint is type(None):
            if value is None:
                return None
            raise self.wrong(value, hint, where)
        if not isinstance(hint, type):
            return value  # a hint this codec does not check (a TypeVar, a Literal): as written
        if not isinstance(value, hint) or (isinstance(value, bool) and hint is not bool):
            raise self.wrong(value, hint, where)
        return value

    def _tuple(self, value: Any, hint: Any, where: str) -> tuple[Any, ...]:
        items = typing.get_args(hint)
        if not isinstance(value, list | tuple):
            raise self.wrong(value, hint, where)
        if len(items) == 2 and items[1] is Ellipsis:  # tuple[str, ...]
            return tuple(self.convert(v, items[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(items):
            raise DecodeError(f"{self.noun} {where!r} must be a list of {len(items)} values")
        return tuple(self.convert(v, item, f"{where}[{i}]")
                     for i, (v, item) in enumerate(zip(value, items, strict=True)))

    def _union(self, value: Any, hint: Any, where: str) -> Any:
        options = typing.get_args(hint)
        if value is None:
            if type(None) in options:
                return None
            raise self.wrong(value, hint, where)
        # An object or a list goes to the option of that shape, so that an error inside it names
        # the inner field; a plain value must match one of the plain options.
        for option in options:
            if _same_shape(value, option):
                return self.convert(value, option, where)
        for option in options:
            if option is type(None) or typing.get_origin(option) is not None:
                continue
            try:
                return self.convert(value, option, where)
            except DecodeError:
                continue
        raise self.wrong(value, hint, where)

    def build(self, cls: type[D], data: Any, where: str) -> D:
        """An instance of the dataclass ``cls`` from its dict form."""
        if not isinstance(data, dict):
            raise DecodeError(f"{self.noun} {where or cls.__name__!r} must be a JSON object, "
                              f"got {type(data).__name__}")
        names: dict[str, str] = getattr(cls, "JSON_NAMES", {})
        hints = _hints(cls)
        values, known = {}, _keys(cls)
        for spec in dataclasses.fields(cls):
            key = names.get(spec.name, spec.name)
            if not _stored(spec):
                continue
            if _inline(spec):  # its keys sit in this object: the part of it that is theirs
                inner = hints[spec.name]
                values[spec.name] = self.build(inner, {k: v for k, v in data.items()
                                                       if k in _keys(inner)}, where)
                continue
            path = field_path(where, key)
            if key not in data:
                if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                    raise DecodeError(f"{self.noun} {path!r} is missing")
                continue
            codec = spec.metadata.get("codec")
            values[spec.name] = (codec.decode(data[key], self.context)
                                 if codec is not None and data[key] is not None
                                 else self.convert(data[key], hints[spec.name], path))
        unknown = [key for key in data if key not in known]
        if unknown and self.strict:
            fields = ", ".join(spec.name for spec in dataclasses.fields(cls) if _stored(spec))
            raise DecodeError(f"{field_path(where, str(unknown[0]))}: {cls.__name__} has no field "
                              f"{', '.join(map(repr, unknown))}; its fields: {fields}")
        if unknown and self.skipped is not None:
            self.skipped.extend(field_path(where, str(key)) for key in unknown)
        if not self.checked:
            return _unchecked(cls, values)
        try:
            return cls(**values)
        except UsageError as error:  # the class's own check (an unknown verdict, say)
            if self.strict:
                raise
            raise DecodeError(f"{self.noun} {where or cls.__name__!r}: {error}") from None


def _unchecked(cls: type[D], values: dict[str, Any]) -> D:
    """An instance of ``cls`` holding ``values`` (the rest their defaults), its own checks
    (``__post_init__``) not run."""
    instance = cls.__new__(cls)
    for spec in dataclasses.fields(cls):
        if spec.name in values:
            value = values[spec.name]
        elif spec.default is not dataclasses.MISSING:
            value = spec.default
        elif spec.default_factory is not dataclasses.MISSING:
            value = spec.default_factory()
        else:
            continue
        object.__setattr__(instance, spec.name, value)
    return instance


def _expected(hint: Any) -> str:
    if hint is type(None):
        return "null"
    if isinstance(hint, type):
        return {"float": "number", "int": "integer", "str": "string", "bool": "true/false",
                "list": "list", "dict": "object", "Path": "string"}.get(hint.__name__,
                                                                       f"object ({hint.__name__})")
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_expected(arg) for arg in typing.get_args(hint))
    return {list: "list", tuple: "list", dict: "object", collections.abc.Sequence: "list",
            collections.abc.Mapping: "object"}.get(origin, str(hint))


def _same_shape(value: Any, option: Any) -> bool:
    """Whether ``value`` is the container ``option`` describes (an object, or a list)."""
    origin = typing.get_origin(option)
    if isinstance(value, dict):
        return dataclasses.is_dataclass(option) or origin in (dict, collections.abc.Mapping)
    return isinstance(value, list) and origin in (list, tuple, collections.abc.Sequence)


def decode(kind: Any, value: Any, *, strict: bool = True, where: str | None = None,
           skipped: list[str] | None = None, context: Mapping[str, Any] | None = None,
           checked: bool = True) -> Any:
    """The value of type ``kind`` (a dataclass, or any annotation) that :func:`encode` wrote as
    ``value``, checked field by field. ``strict``: a key that is no field is an error naming its
    path; otherwise it is skipped and its path appended to ``skipped``. ``where``: the path of
    ``value`` in its file (by default, strict: the class's name; lenient: none). ``context``:
    what the fields' own codecs read (``FieldCodec.decode``). ``checked=False``: the dataclasses'
    own checks are not run (a record's options)."""
    if where is None:
        where = getattr(kind, "__name__", "") if strict else ""
    reading = _Reading(strict, "field" if strict else "result field", skipped, context or {},
                       checked)
    return reading.convert(value, kind, where)


def to_dict(options: Any) -> dict[str, Any]:
    """``options`` (a dataclass) as a dict of JSON values."""
    encoded = encode(options)
    assert isinstance(encoded, dict)
    return encoded


def from_dict(kind: type[T], data: dict[str, Any]) -> T:
    """The ``kind`` that :func:`to_dict` wrote as ``data``, strictly (a key that is no field is
    an error naming its path)."""
    return decode(kind, data)


class Codec:
    """``to_dict`` and a strict ``from_dict`` for a dataclass, derived from its fields."""

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        return from_dict(cls, data)
