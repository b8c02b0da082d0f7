"""The machine id of this install: one machine's shared results group together, and nothing about
the machine can be read from it (it is not derived from any hardware or host fact).

Where ``cryptography`` is installed the id is the hash of the installation's signing key
(``signing.py``), so that every line it shares can prove it came from this install; otherwise it is
16 random hex digits (lines shared unsigned). Kept in the data folder (``machine-id``, beside
``signing-key``); ``accelbench share --new-machine-id`` replaces both (``--dry-run`` shows the id it
would use and writes nothing). An install that made a random id before signing existed takes its
key's id at its next share (its earlier lines stay under the old id, unsigned).
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from accelbench.errors import UsageError
from accelbench.files import data_home, write_atomic
from accelbench.sharing.signing import ID_DIGITS, Signer, can_sign, store_signer, stored_signer

MACHINE_ID_FILE = "machine-id"
_ID = re.compile(rf"[0-9a-f]{{16}}|[0-9a-f]{{{ID_DIGITS}}}")


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


def _store_id(identity: str) -> None:
    path = machine_id_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, identity + "\n")
    except OSError as error:
        raise UsageError(f"cannot write the machine id {path}: {error}") from None


def identity(new: bool = False, store: bool = True) -> tuple[str, Signer | None]:
    """This install's id and the key that signs its lines (None without ``cryptography``): made on
    first use, or anew with ``new``. With ``store`` False nothing new is written (``share
    --dry-run``): a new key or id is only shown."""
    if can_sign():
        signer = None if new else stored_signer()
        if signer is None:
            signer = Signer.generate()
            if store:
                store_signer(signer)
        if store and stored_machine_id() != signer.machine_id:
            _store_id(signer.machine_id)
        return signer.machine_id, signer
    # A key's id without the key's library: its lines could not be signed, and an unsigned line under
    # a key's id is refused as forged, so such an install shares under a random id instead.
    current = stored_machine_id()
    return machine_id(new or (current is not None and len(current) == ID_DIGITS), store), None


def machine_id(new: bool = False, store: bool = True) -> str:
    """An unsigned install's id (made on first use, or anew with ``new``): 16 random hex digits.
    With ``store`` False a new id is only shown, never written (``share --dry-run``)."""
    current = None if new else stored_machine_id()
    if current is not None:
        return current
    fresh = secrets.token_hex(8)
    if store:
        _store_id(fresh)
    return fresh
