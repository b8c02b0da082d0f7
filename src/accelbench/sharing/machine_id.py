"""The random machine id of this install: one machine's shared results group together, and
nothing about the machine can be read from it (it is not derived from any hardware or host fact).
Kept in the data folder; ``accelbench share --new-machine-id`` replaces it (``--dry-run`` shows the
id it would use and writes nothing)."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from accelbench.errors import UsageError
from accelbench.files import data_home, write_atomic

MACHINE_ID_FILE = "machine-id"
_ID = re.compile(r"[0-9a-f]{16}")


def machine_id_path() -> Path:
    return data_home() / MACHINE_ID_FILE


def stored_machine_id() -> str | None:
    """This install's id if one was made (None otherwise); never writes."""
    path = machine_id_path()
    if not path.exists():
        return None
    try:
        current = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read the machine id {path}: {error}") from None
    return current if _ID.fullmatch(current) else None


def machine_id(new: bool = False, store: bool = True) -> str:
    """This install's id (made on first use, or anew with ``new``): 16 random hex digits. With
    ``store`` False a new id is only shown, never written (``share --dry-run``)."""
    current = None if new else stored_machine_id()
    if current is not None:
        return current
    fresh = secrets.token_hex(8)
    if not store:
        return fresh
    path = machine_id_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, fresh + "\n")
    except OSError as error:
        raise UsageError(f"cannot write the machine id {path}: {error}") from None
    return fresh
