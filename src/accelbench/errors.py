"""Errors that accelbench reports to the user as one line and exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping


class UsageError(Exception):
    """Bad input from the user: a name, a number, a path or a file that cannot be used.

    The message is one line naming the problem and what is allowed. The CLI prints it without a
    traceback and exits with code 2.
    """


class DeviceUnavailableError(UsageError):
    """A device was asked for that this machine or this torch build cannot provide."""


def did_you_mean(given: str, known: Iterable[str],
                 aliases: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """" (did you mean 'mnist'?)" for a mistyped name: the names ``aliases`` gives for it (what
    people call a thing: gpu -> cuda), else the known names closest to it (as close as the
    closest, within a little); "" when none is close."""
    hits = list((aliases or {}).get(given.casefold(), ()))
    if not hits:
        scores = sorted(((difflib.SequenceMatcher(None, given.casefold(), name.casefold()).ratio(),
                          name) for name in dict.fromkeys(known)), key=lambda pair: -pair[0])
        best = scores[0][0] if scores else 0.0
        hits = [name for score, name in scores[:3] if score >= max(0.6, best - 0.05)]
    if not hits:
        return ""
    quoted = [repr(hit) for hit in hits]
    spoken = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f" (did you mean {spoken}?)"
