"""Tokens that prove a generation run: the greedy tokens of the fp64 CPU reference, shipped.

The built-in decoders' weights are seeded random numbers, so the fp64 CPU reference's greedy
tokens for a workload (and its version), size, seed, batch, prompt length and new tokens are fixed.
``expected_tokens.json`` (beside this module) holds them, with their hash and the reference's
logit margin at every position, for the tests of every ``--protocol`` and accelbench's default
lengths, written by ``scripts/expected_tokens.py`` (which a test holds to the file). A generation
result carries its own tokens' hash and whether it matches: exactly, or the first position where
it leaves the reference (as MLPerf Client counts only runs that produce its expected token ids).

Whether leaving the reference is evidence of a fault depends on the precision. fp32 must follow
the fp64 reference token for token (``MUST_FOLLOW``). Every other precision rounds its products
(tf32, fp16, bf16) or its weights (int8, int4) far more coarsely, and may take the other side of
a near tie: its first difference is judged against the reference's margin there (its best logit
minus its second best, relative to the position's largest |logit|, as ``check --mode generate``
measures ties): within the precision's tie tolerance (parity's ``pass`` tolerance) the rounding
can flip it ("near tie", honest); beyond it, it cannot ("clear winner": a wrong kernel, or not
this work). Tokens after the first difference follow from a different prefix and are not judged.
The same judgement catches a wrong kernel on a device and a forged fp32 line in a shared bundle.
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


#: Precisions that must produce the fp64 reference's tokens exactly: fp32's logits stay within
#: about 1e-6 (relative) of fp64's (gpt2 published 512 + 128: 1.1e-6), some 200 times below the
#: smallest margin shipped (2.4e-4, the same shape), and the script decodes every shipped shape in
#: fp32 and stops if it leaves fp64; so an fp32 run that leaves the reference computed something
#: else (TF32 left on, a wrong kernel). tf32 and fp16 (10-bit mantissas), bf16 (7 bits) and the
#: weight-only int8/int4 precisions are judged by the margin at their first difference.
MUST_FOLLOW = ("fp32",)
#: What a difference is judged to be (``judge_difference``); the first two mean the tokens cannot
#: be this precision's honest run of this work.
IMPLAUSIBLE = ("must follow", "clear winner")


def reference_margin(entry: dict[str, Any] | None, position: int | None) -> float | None:
    """The shipped reference's relative logit margin at ``position``: the smallest over its
    sequences (the position is the first difference over all of them, so any of them may be the
    one that left). None where the entry ships no margins or the position is not in it."""
    margins = (entry or {}).get("margins")
    if not margins or position is None or position < 0:
        return None
    found = [row[position] for row in margins if position < len(row)]
    return min(found) if found else None


def judge_difference(precision: str, position: int | None, margin: float | None,
                     tie: float | None) -> str:
    """What tokens that leave the reference are: "must follow" (the precision must follow fp64,
    or has no tie tolerance), "near tie" (the reference's ``margin`` at the first difference
    ``position`` is within the precision's ``tie`` tolerance: its rounding can flip it),
    "clear winner" (beyond it), or "unjudged" (no position or no margin to judge by)."""
    if precision in MUST_FOLLOW or tie is None:
        return "must follow"
    if position is None or margin is None:
        return "unjudged"
    return "near tie" if margin <= tie else "clear winner"


def token_check(key: TokenKey, tokens: Sequence[Sequence[int]], precision: str = "fp32",
                tie: float | None = None) -> dict[str, Any]:
    """The ``tokens`` section of a generation result: this run's hash, the expected one where
    shipped, whether they match (``match``: "exact", "differs", or "no reference shipped") and,
    where they differ, the first differing position, the reference's margin there and the
    verdict (``judge_difference``) for ``precision`` with its ``tie`` tolerance (without them,
    the strictest: the tokens must follow)."""
    mine = tokens_hash(tokens)
    entry = expected(key)
    section: dict[str, Any] = {"hash": mine, "expected_hash": None, "match": "no reference shipped",
                               "first_difference": None, "precision": precision, "verdict": None,
                               "reference_margin": None, "tie_tolerance": tie,
                               "reference": key.text(), "hashed": HASHED}
    if entry is None:
        return section
    section.update(expected_hash=entry["hash"], match="exact", verdict="exact")
    if entry["hash"] != mine:
        position = first_difference(tokens, entry["tokens"])
        margin = reference_margin(entry, position)
        section.update(match="differs", first_difference=position, reference_margin=margin,
                       verdict=judge_difference(precision, position, margin, tie))
    return section


def explain(verdict: str, precision: str, position: int | None, margin: float | None,
            tie: float | None) -> str:
    """A differing run's verdict in words (the table's cell, a reader's reason)."""
    where = f"at {position}" if position is not None else "(position not given)"
    if verdict == "must follow":
        return f"tokens differ {where}: {precision} must follow the fp64 reference token for token"
    if verdict in ("near tie", "clear winner"):
        relation = "within" if verdict == "near tie" else "beyond"
        return (f"tokens differ {where}, a {verdict}: the reference's margin there {margin:.3g} is "
                f"{relation} {precision}'s tie tolerance {tie:g}")
    return f"tokens differ {where}: not judged (no reference margin there)"


def describe(section: dict[str, Any] | None, full: bool = False) -> str:
    """A table cell: "tokens match", "tokens differ at 4: a near tie", "no reference tokens";
    ``full``: the verdict with its reason (``explain``), as the line under the table gives it."""
    if not section:
        return ""
    match = section.get("match")
    if match == "exact":
        return "tokens match"
    if match == "differs":
        verdict, position = section.get("verdict"), section.get("first_difference")
        if verdict is None:  # a result made before differences were judged
            return f"tokens differ at {position}" if position is not None else "tokens differ"
        if full:
            return explain(str(verdict), str(section.get("precision")), position,
                           section.get("reference_margin"), section.get("tie_tolerance"))
        short = {"must follow": f"{section.get('precision')} must follow"}.get(str(verdict), f"a {verdict}")
        return f"tokens differ at {position}: {short}"
    return "no reference tokens"
