"""Two shares of one case: a duplicate, a conflict, or a forgery that signatures expose.

Machine and case ids are public in every bundle, and which line a reader meets first (a file's
name, a month folder) is the submitter's choice, so no rule may keep "the first" of two lines that
disagree. Over every usable line read (its content-hash duplicates already dropped):

1. an unsigned line under a machine id that a signed line of the collection holds is refused
   (``signing.FORGED_ID``: that id is the hash of a key, and its owner signs every line);
2. the lines of one machine and case (``sources.case_identity``) with one measurement (key,
   device model, headline rate: ``measurement``) are one result: the first met is kept, the
   others are duplicates (a case shared again after its validity changed);
3. where they disagree, each signed line among them is verified (``signing.verify_signature``;
   ``sources.parse_result`` already refused one that does not verify as it was read: this holds
   for shares made otherwise) and one that does not verify is refused; if they still disagree,
   every one of them is kept and quarantined (``compare/outliers.CONFLICT``: out of every band)
   and reported.

``hub compact`` applies the same steps in SQL (``hub/compact.py``), having verified every signature
as it read the lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.compare.outliers import CONFLICT
from accelbench.compare.peers import PeerResult
from accelbench.sharing.bundle import BadLine
from accelbench.sharing.signing import BAD_SIGNATURE, FORGED_ID, verify_signature

Warn = Callable[[str], None]


def measurement(peer: PeerResult) -> tuple[Any, ...]:
    """What two shares of one case must agree on: the key, the device model and the headline rate
    (a case re-shared with another validity, or by a newer accelbench, agrees). ``hub compact``'s
    SQL compares the same columns (key_id, device_model, rate)."""
    return peer.key, peer.device_model, peer.throughput


@dataclass(frozen=True, slots=True)
class Share:
    """A usable line as the resolution needs it (a collection holds one per line: slots)."""

    peer: PeerResult
    #: machine id and case identity ("" for a line without a machine id: a machine of its own).
    case: str
    #: The line's public key and signature, where it carries them (bound to its machine id).
    signed: tuple[str, str] | None
    #: Where it was read: the document and the line number.
    source: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.source} line {self.line}"


@dataclass
class Resolved:
    peers: list[PeerResult] = field(default_factory=list)
    duplicates: int = 0
    conflicts: int = 0
    #: Results kept that carry no signature.
    unsigned: int = 0
    refused: Counter[str] = field(default_factory=Counter)


def _verifies(share: Share) -> bool:
    """A signed share whose signature holds (True where it cannot be checked here: no
    ``cryptography``; the binding of its key to its id was checked when it was read)."""
    if share.signed is None:
        return True
    line = {"hash": share.peer.content_hash, "machine_id": share.peer.machine_id,
            "public_key": share.signed[0], "signature": share.signed[1]}
    try:
        verify_signature(line)
    except BadLine:
        return False
    return True


def resolve(shares: list[Share], warn: Warn) -> Resolved:
    """The results of ``shares`` (in the order met), each case once, conflicts quarantined."""
    done = Resolved()
    signed_ids = {s.peer.machine_id for s in shares if s.signed is not None}
    # By case, in the order met; a line without a machine id is a case of its own (its index).
    groups: dict[str | int, list[Share]] = {}
    for index, share in enumerate(shares):
        if share.signed is None and share.peer.machine_id in signed_ids:
            done.refused[FORGED_ID] += 1
            warn(f"{share.where} refused: unsigned, under the id of a machine that signs its lines (forged)")
            continue
        members = groups.get(share.case or index)
        if members is None:
            groups[share.case or index] = [share]
        else:
            members.append(share)
    for members in groups.values():
        for share in members if len(members) == 1 else _settle(members, done, warn):
            done.peers.append(share.peer)
            if share.signed is None:
                done.unsigned += share.peer.results
    return done


def _settle(members: list[Share], done: Resolved, warn: Warn) -> list[Share]:
    """One machine and case: the one result, or every disagreeing line quarantined."""
    if len({measurement(s.peer) for s in members}) > 1:
        for share in [s for s in members if not _verifies(s)]:
            done.refused[BAD_SIGNATURE] += 1
            warn(f"{share.where} refused: its signature does not verify (not made by the machine's key)")
            members = [s for s in members if s is not share]
    first: dict[tuple[Any, ...], Share] = {}
    for share in members:
        first.setdefault(measurement(share.peer), share)
    done.duplicates += len(members) - len(first)
    if len(first) == 1:
        return list(first.values())
    done.conflicts += len(first)
    rates = ", ".join(f"{s.peer.throughput:.4g} ({s.where})" for s in first.values())
    warn(f"conflict: {len(first)} lines of machine {members[0].peer.machine_id} share one case with "
         f"different figures ({rates}); all kept out of every band")
    return [replace(s, peer=replace(s.peer, outlier=CONFLICT)) for s in first.values()]
