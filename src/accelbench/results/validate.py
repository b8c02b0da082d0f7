"""One loader for every result record: a dataclass from its JSON form, each field checked against
its annotation, and the reverse.

A record class lists its fields with ordinary annotations (``float | None``, ``list[int]``,
``dict[str, ProbeCell]``, ``tuple[str, float]``, another record); :func:`build` walks them, so a new
field is validated the moment it is declared, and an error names the field by its path in the file
(``cases[1].parity.tolerance.drift``). Unknown keys are ignored, so a file that carries a derived
block (``derived``) or a key from a newer minor change still loads; a missing field with a default
takes the default.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, ClassVar, TypeVar

from accelbench.errors import UsageError

T = TypeVar("T")


class Record:
    """Mixin of the typed records: ``to_dict`` and a validating ``from_dict``.

    ``JSON_NAMES`` maps a field to its key in the file where the two differ (``pass`` is a Python
    keyword)."""

    JSON_NAMES: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        return dump(self)

    @classmethod
    def from_dict(cls: type[T], data: Any, where: str = "") -> T:
        return build(cls, data, where)


def field_path(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _expected(hint: Any) -> str:
    if hint is type(None):
        return "null"
    if isinstance(hint, type):
        return {"float": "number", "int": "integer", "str": "string", "bool": "true/false",
                "list": "list", "dict": "object"}.get(hint.__name__, f"object ({hint.__name__})")
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_expected(arg) for arg in typing.get_args(hint))
    return {list: "list", tuple: "list", dict: "object"}.get(origin, str(hint))


def _wrong(value: Any, hint: Any, where: str) -> UsageError:
    return UsageError(f"result field {where!r} has the wrong type: {type(value).__name__} "
                      f"(expected {_expected(hint)})")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def convert(value: Any, hint: Any, where: str) -> Any:
    """``value`` checked against ``hint``; dicts become the records the hint names."""
    if hint is Any:
        return value
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _convert_union(value, hint, where)
    if dataclasses.is_dataclass(hint):
        return build(hint, value, where)  # type: ignore[arg-type]
    if origin is list:
        if not isinstance(value, list):
            raise _wrong(value, hint, where)
        (item,) = typing.get_args(hint)
        return [convert(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        items = typing.get_args(hint)
        if not isinstance(value, list | tuple) or len(value) != len(items):
            raise UsageError(f"result field {where!r} must be a list of {len(items)} values")
        return tuple(convert(v, item, f"{where}[{i}]")
                     for i, (v, item) in enumerate(zip(value, items, strict=True)))
    if origin is dict:
        if not isinstance(value, dict):
            raise _wrong(value, hint, where)
        _, item = typing.get_args(hint)
        return {str(k): convert(v, item, field_path(where, str(k))) for k, v in value.items()}
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        raise _wrong(value, hint, where)
    if not isinstance(value, hint) or (isinstance(value, bool) and hint is not bool):
        raise _wrong(value, hint, where)
    return value


def _convert_union(value: Any, hint: Any, where: str) -> Any:
    options = typing.get_args(hint)
    if value is None:
        if type(None) in options:
            return None
        raise _wrong(value, hint, where)
    # An object or a list goes to the option of that shape, so that an error inside it names the
    # inner field; a plain value must match one of the plain options.
    for option in options:
        if _same_shape(value, option):
            return convert(value, option, where)
    for option in options:
        if option is type(None) or typing.get_origin(option) is not None:
            continue
        try:
            return convert(value, option, where)
        except UsageError:
            continue
    raise _wrong(value, hint, where)


def _same_shape(value: Any, option: Any) -> bool:
    """Whether ``value`` is the container ``option`` describes (an object, or a list)."""
    if isinstance(value, dict):
        return dataclasses.is_dataclass(option) or typing.get_origin(option) is dict
    return isinstance(value, list) and typing.get_origin(option) in (list, tuple)


def build(cls: type[T], data: Any, where: str = "") -> T:
    """An instance of the record ``cls`` from its dict form, or a UsageError naming the field."""
    if not isinstance(data, dict):
        raise UsageError(f"result field {where or cls.__name__!r} must be a JSON object, "
                         f"got {type(data).__name__}")
    names: dict[str, str] = getattr(cls, "JSON_NAMES", {})
    hints = _hints(cls)
    values = {}
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = names.get(spec.name, spec.name)
        path = field_path(where, key)
        if key not in data:
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                raise UsageError(f"result field {path!r} is missing")
            continue
        values[spec.name] = convert(data[key], hints[spec.name], path)
    try:
        return cls(**values)
    except UsageError as error:  # a record's own check (an unknown verdict, say)
        raise UsageError(f"result field {where or cls.__name__!r}: {error}") from None


def dump(value: Any) -> Any:
    """The JSON form of a record (recursively); tuples become lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names: dict[str, str] = getattr(value, "JSON_NAMES", {})
        return {names.get(spec.name, spec.name): dump(getattr(value, spec.name))
                for spec in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    return value


def check_choice(value: str, allowed: tuple[str, ...], name: str) -> None:
    """A field holding one of a few words: anything else is a one-line error listing them."""
    if value not in allowed:
        raise UsageError(f"{name} {value!r} is unknown; allowed: {', '.join(allowed)}")
