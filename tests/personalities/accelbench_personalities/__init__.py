"""Hardware personalities: emulated devices that fail the way real ones do (see README.md).

``ACCELBENCH_TEST_PERSONALITY=<name>`` makes every Python process that has ``tests/personalities``
on its path (sitecustomize.py) install the personality at start; :func:`install` does it in this
process.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

PERSONALITY_ENV = "ACCELBENCH_TEST_PERSONALITY"


def _ampere() -> Any:
    from accelbench_personalities import ampere
    return ampere.install()


def _slow_sync() -> Any:
    from accelbench_personalities import ampere
    return ampere.install_slow_sync()


def _mps() -> Any:
    from accelbench_personalities import mps
    return mps.install(peak=True)


def _mps_nopeak() -> Any:
    from accelbench_personalities import mps
    return mps.install(peak=False)


PERSONALITIES: dict[str, Callable[[], Any]] = {
    "ampere": _ampere,
    "mps": _mps,
    "mps-nopeak": _mps_nopeak,
    "slow-sync": _slow_sync,
}

_installed: list[str] = []


def install(name: str) -> Any:
    """Install personality ``name`` in this process (once; a second, different one is refused:
    a process has one machine)."""
    if name not in PERSONALITIES:
        raise ValueError(f"unknown personality {name!r}; known: {', '.join(PERSONALITIES)}")
    if _installed:
        if _installed[0] != name:
            raise RuntimeError(f"personality {_installed[0]!r} is installed already")
        return None
    _installed.append(name)
    return PERSONALITIES[name]()


def uninstall() -> None:
    """Undo :func:`install`: torch's functions back, the placement mode gone."""
    from accelbench_personalities import patches, placement

    placement.uninstall()
    patches.restore()
    _installed.clear()


@contextlib.contextmanager
def active(name: str) -> Iterator[Any]:
    """The personality installed in this process for the block only (for tests); the journal's
    op counts start from zero."""
    from accelbench_personalities import journal

    journal.counts.clear()
    rules = install(name)
    try:
        yield rules
    finally:
        uninstall()


def installed() -> str | None:
    return _installed[0] if _installed else None


def install_from_env() -> None:
    name = os.environ.get(PERSONALITY_ENV, "").strip()
    if name:
        install(name)
