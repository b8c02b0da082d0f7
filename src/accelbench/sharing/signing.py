"""Signed lines: who shared a line, proven rather than claimed.

A machine id is public in every bundle, so anyone could share a line under someone else's id.
Each installation therefore holds an Ed25519 key pair (``signing-key`` in the data folder, made on
first use, readable by its owner only); its machine id is the first ``ID_DIGITS`` hex digits of
the sha256 of the public key, and every line it shares carries the public key and a signature::

    {"hash": ..., "machine_id": ..., "public_key": <64 hex>, "signature": <128 hex>, <content>}

The signature is over ``DOMAIN``, the content hash and the machine id: the hash covers the whole
content, so nothing of the result can change without breaking it, and neither can the id. Both
members are outside the content (``bundle._NOT_HASHED``), so the hash and the case identity of a
result do not depend on whether it was signed.

A reader checks two things. The **binding**, a hash (microseconds): a line that claims a key must
carry the id of that key; a forger's own key gives another id, so a line claiming a victim's id
with the forger's key is refused. The **signature**, an Ed25519 verification (tens of
microseconds, ``cryptography``): every signed line is verified as it is read, by ``hub compact``
and by every direct read of a bundle (``compare --against``, ``site``, ``hub aggregate``:
``sources.parse_result``), and one that does not verify is refused (``BAD_SIGNATURE``). Since
an id that is the hash of a key can only have been made by that key's owner, and
the owner signs every line, an *unsigned* line under the id of a key seen in the collection is
forged, and is refused without any verification.

Lines without a signature (older accelbench, or a machine without ``cryptography``) keep loading:
they are counted apart as unsigned. Signing and verifying need ``cryptography`` (``pip install
'accelbench[hub]'``); without it ``share`` writes unsigned lines and says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

from accelbench.errors import UsageError
from accelbench.files import data_home, write_atomic
from accelbench.sharing.bundle import BadLine, content_hash, dump_line

SIGNING_KEY_FILE = "signing-key"
#: Hex digits of the key's sha256 that make a machine id (128 bits: no one finds a second key for it).
ID_DIGITS = 32
DOMAIN = b"accelbench signed line 1\0"
BAD_SIGNATURE = "bad signature"
FORGED_ID = "unsigned under a signed machine id"
_KEY = re.compile(r"[0-9a-f]{64}")
_SIGNATURE = re.compile(r"[0-9a-f]{128}")
SIGNING_HELP = "pip install 'accelbench[hub]' (cryptography)"


def can_sign() -> bool:
    try:
        import cryptography.hazmat.primitives.asymmetric.ed25519  # noqa: F401
    except ImportError:
        return False
    return True


def id_of_key(public_key_hex: str) -> str:
    """The machine id of a public key (hex)."""
    return hashlib.sha256(bytes.fromhex(public_key_hex)).hexdigest()[:ID_DIGITS]


def _message(content_hash: str, machine: str) -> bytes:
    return DOMAIN + content_hash.encode("ascii") + b"\0" + machine.encode("ascii")


class Signer:
    """This installation's key pair: its machine id, and a line signed with it."""

    def __init__(self, private_hex: str) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        self._key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
        self.private_hex = private_hex
        self.public_hex = self._key.public_key().public_bytes_raw().hex()
        self.machine_id = id_of_key(self.public_hex)

    @classmethod
    def generate(cls) -> Signer:
        return cls(os.urandom(32).hex())

    def sign_line(self, text: str) -> str:
        """A bundle line (as ``dump_line`` wrote it) under this key's machine id, signed. The
        content and its hash stay as they were."""
        data: dict[str, Any] = json.loads(text)
        data["machine_id"] = self.machine_id
        data["public_key"] = self.public_hex
        # The hash the written line will carry (``dump_line`` writes the content canonically).
        data["signature"] = self._key.sign(_message(content_hash(data), self.machine_id)).hex()
        return dump_line({name: value for name, value in data.items() if name not in ("bundle", "hash")})


def signing_key_path() -> Any:
    return data_home() / SIGNING_KEY_FILE


def stored_signer() -> Signer | None:
    """This installation's key pair where one was made and ``cryptography`` is installed."""
    path = signing_key_path()
    if not path.exists() or not can_sign():
        return None
    try:
        private = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read the signing key {path}: {error}") from None
    if not _KEY.fullmatch(private):
        raise UsageError(f"the signing key {path} is not 64 hex digits; remove it to make a new one "
                         "(and a new machine id)")
    return Signer(private)


def store_signer(signer: Signer) -> None:
    path = signing_key_path()
    # Readable by its owner only from its first byte: write_atomic gives files 0666 less the umask.
    umask = os.umask(0o077)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, signer.private_hex + "\n")
    except OSError as error:
        raise UsageError(f"cannot write the signing key {path}: {error}") from None
    finally:
        os.umask(umask)


def claims_signature(line: dict[str, Any]) -> bool:
    """Whether the line carries a key and a signature, bound to its machine id (checked here: a
    claim of a key whose id is not the line's is refused)."""
    key, signature = line.get("public_key"), line.get("signature")
    if key is None and signature is None:
        return False
    if not isinstance(key, str) or not _KEY.fullmatch(key) or not isinstance(signature, str) \
            or not _SIGNATURE.fullmatch(signature):
        raise BadLine("a public key or signature that is not hex of the right length", BAD_SIGNATURE)
    if line.get("machine_id") != id_of_key(key):
        raise BadLine("signed with a key whose machine id is not the line's", BAD_SIGNATURE)
    return True


def verify_signature(line: dict[str, Any]) -> bool:
    """Verify a signed line's signature (``claims_signature`` first): BadLine when it does not
    hold; False when it cannot be checked here (no ``cryptography``)."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(line["public_key"])).verify(
            bytes.fromhex(line["signature"]), _message(line["hash"], line["machine_id"]))
    except InvalidSignature:
        raise BadLine("the signature does not verify (not made by the machine's key, or the line "
                      "changed)", BAD_SIGNATURE) from None
    return True
