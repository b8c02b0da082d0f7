"""Tokens that prove a generation run: the greedy tokens of the fp64 CPU reference, shipped.

The built-in decoders' weights are seeded random numbers, so the fp64 CPU reference's greedy
tokens for a workload (and its version), size, seed, batch, prompt length and new tokens are fixed.
``expected_tokens.json`` (beside this module) holds them, with their hash, for the tests of every
``--protocol`` and accelbench's default lengths, written by ``scripts/expected_tokens.py`` (which a
test holds to the file). A generation result carries its own tokens' hash and whether it matches:
exactly, or the first position where it leaves the reference (as MLPerf Client counts only runs
that produce its expected token ids). A precision coarser than fp64 may leave it at a near tie:
the position says how far it followed. The same hash catches a wrong kernel on a device and a
forged line in a shared bundle.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

EXPECTED_FILE = Path(__file__).with_name("expected_tokens.json")
#: What ``tokens_hash`` hashes, for anyone checking a line by hand.
HASHED = "sha256 of the JSON list of each sequence's token ids (no spaces): [[t0, t1, ...], ...]"


def tokens_hash(tokens: Sequence[Sequence[int]]) -> str:
    text = json.dumps([[int(t) for t in row] for row in tokens], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class TokenKey:
    workload: str
    workload_version: int
    size: str
    seed: int
    batch_size: int
    prompt_len: int
    new_tokens: int

    def text(self) -> str:
        return (f"{self.workload} v{self.workload_version} {self.size} seed {self.seed} batch "
                f"{self.batch_size} prompt {self.prompt_len} +{self.new_tokens}")


@lru_cache(maxsize=1)
def _entries() -> dict[TokenKey, dict[str, Any]]:
    if not EXPECTED_FILE.exists():
        return {}
    data = json.loads(EXPECTED_FILE.read_text())
    return {TokenKey(**{k: e[k] for k in TokenKey.__dataclass_fields__}): e for e in data["entries"]}


def expected(key: TokenKey) -> dict[str, Any] | None:
    """The shipped entry (its ``tokens`` and ``hash``) for ``key``; None where none is shipped."""
    return _entries().get(key)


def first_difference(tokens: Sequence[Sequence[int]], reference: Sequence[Sequence[int]]) -> int | None:
    """The first position (0 = the first new token), over all sequences, where ``tokens`` leave
    ``reference``; None when they are the same."""
    positions = [next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
                      None if len(mine) == len(theirs) else min(len(mine), len(theirs)))
                 for mine, theirs in zip(tokens, reference, strict=False)]
    found = [p for p in positions if p is not None]
    if len(tokens) != len(reference):
        found.append(0)
    return min(found) if found else None


def token_check(key: TokenKey, tokens: Sequence[Sequence[int]]) -> dict[str, Any]:
    """The ``tokens`` section of a generation result: this run's hash, the expected one where
    shipped, and whether they match (``match``: "exact", "differs", or "no reference shipped")."""
    mine = tokens_hash(tokens)
    entry = expected(key)
    if entry is None:
        return {"hash": mine, "expected_hash": None, "match": "no reference shipped",
                "first_difference": None, "reference": key.text(), "hashed": HASHED}
    position = None if entry["hash"] == mine else first_difference(tokens, entry["tokens"])
    return {"hash": mine, "expected_hash": entry["hash"],
            "match": "exact" if entry["hash"] == mine else "differs",
            "first_difference": position, "reference": key.text(), "hashed": HASHED}


def describe(section: dict[str, Any] | None) -> str:
    """A short cell: "tokens match", "tokens differ at 12", "no reference tokens"."""
    if not section:
        return ""
    match = section.get("match")
    if match == "exact":
        return "tokens match"
    if match == "differs":
        position = section.get("first_difference")
        return f"tokens differ at {position}" if position is not None else "tokens differ"
    return "no reference tokens"
