"""The one check that a number given as a flag or a keyword is usable: the options (``options/``)
and the stop rule (``measure/loop/stop.py``) both validate with it, so the CLI and the Python API
report a bad value in the same words. At the bottom of the layers, beside ``errors``."""

from __future__ import annotations

import math

from accelbench.errors import UsageError

#: Beyond these a value is a typo, not a measurement plan (and would overflow timers and ranges).
MOST_COUNT = 10**9
MOST_SECONDS = 1e7


def check_number(flag: str, value: object, *, whole: bool, zero_ok: bool,
                 most: float = MOST_COUNT) -> None:
    """Raise UsageError unless ``value`` is a finite number (an int when ``whole``) above zero (or
    at least zero) and at most ``most``. The one check behind the CLI flags and the Python
    keywords, so both report a bad value with the same words."""
    given = shown(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{flag} must be a {'whole ' if whole else ''}number, got {given}")
    if whole and not isinstance(value, int):
        raise UsageError(f"{flag} must be a whole number, got {value!r}")
    if not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, got {given}")
    if value < 0 or (value == 0 and not zero_ok):
        raise UsageError(f"{flag} must be {'0 or more' if zero_ok else 'positive'}, got {given}")
    if value > most:
        raise UsageError(f"{flag} must be at most {most:.0f}, got {given}")


def shown(value: object) -> str:
    """``value`` as an error message shows it: 3 and 3.0 read the same (the CLI parses a float
    where Python code may pass an int)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, str) else str(value)
