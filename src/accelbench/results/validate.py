"""The result records' side of the one codec (``accelbench.codec``): a record is read leniently,
so a file that carries a derived block (``derived``) or a key from a newer minor change still
loads; a key that is no field is skipped (and counted where the caller asks), a missing field with
a default takes the default, and an error names the field by its path in the file
(``cases[1].parity.tolerance.drift``).
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from accelbench.codec import DecodeError, _hints, decode, encode, field_path
from accelbench.errors import UsageError

T = TypeVar("T")

__all__ = ["DecodeError", "Record", "_hints", "build", "check_choice", "dump", "field_path"]


class Record:
    """Mixin of the typed records: ``to_dict`` and a validating, lenient ``from_dict``.

    ``JSON_NAMES`` maps a field to its key in the file where the two differ (``pass`` is a Python
    keyword)."""

    JSON_NAMES: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        return dump(self)

    @classmethod
    def from_dict(cls: type[T], data: Any, where: str = "") -> T:
        return build(cls, data, where)


def build(cls: type[T], data: Any, where: str = "", skipped: list[str] | None = None) -> T:
    """An instance of the record ``cls`` from its dict form, or a UsageError naming the field;
    the paths of keys that are no field go to ``skipped``."""
    return decode(cls, data, strict=False, where=where, skipped=skipped)


#: The JSON form of a record (recursively); tuples become lists.
dump = encode


def check_choice(value: str, allowed: tuple[str, ...], name: str) -> None:
    """A field holding one of a few words: anything else is a one-line error listing them."""
    if value not in allowed:
        raise UsageError(f"{name} {value!r} is unknown; allowed: {', '.join(allowed)}")
