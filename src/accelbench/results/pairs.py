"""Compiled against uncompiled: when a run holds both cases of the same work, when compiling pays
for itself.

``--compile inductor,none`` runs each case compiled and not; the compiled case's
``break_even`` (results/first_use.BreakEven) then says after how many steps (generations,
for a generation case) the compile time is made up by the time each compiled step saves, or that
it never is. The compile time charged is the compiled warm-up's excess less the uncompiled
warm-up's own, so first-use costs both sides pay are not charged to the compile; a side that did
not start cold (results/first_use.Start) is named in the figure. The counterpart is the case
that did the same work on the same device (the one comparability key, results/key.py) with no
compile back end. Filled by the engine as cases finish, so the stored result, the table and
``compare`` all read the same figure.
"""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.results.first_use import BreakEven, break_even, phases, warmup_excess
from accelbench.results.key import KEY_FIELDS, comparability_key
from accelbench.results.records import CaseResult


def _uncompiled_key(case: CaseResult) -> tuple[object, ...]:
    return (case.device, *(value if name != "compile_backend" else "" for name, value in
                           zip(KEY_FIELDS, comparability_key(case), strict=True)))


def uncompiled_counterpart(case: CaseResult, cases: Sequence[CaseResult]) -> CaseResult | None:
    """The finished uncompiled case of ``case``'s work on its device, or None."""
    if not case.compile_backend:
        return None
    wanted = _uncompiled_key(case)
    return next((other for other in cases if other is not case and other.ok
                 and not other.compile_backend and other.step_times
                 and _uncompiled_key(other) == wanted), None)


def _caveat(compiled: CaseResult, uncompiled: CaseResult) -> str:
    """Why the pair's first-use figures are not cold starts', naming the side."""
    parts = []
    for side, case in (("compiled", compiled), ("uncompiled", uncompiled)):
        start = case.start
        if start is not None and start.caveat():
            parts.append(f"{side}: {start.caveat()}")
    return "; ".join(parts)


def compile_break_even(case: CaseResult, cases: Sequence[CaseResult]) -> BreakEven | None:
    """When ``case`` (compiled) pays for its compile time against its uncompiled counterpart in
    ``cases``; None when it is not compiled, did not finish, or has no counterpart. Steps for
    training and eval, whole generations (rounds) for a generation case."""
    if not case.ok or not case.step_times:
        return None
    other = uncompiled_counterpart(case, cases)
    if other is None:
        return None
    mine, theirs = phases(case, case.generation), phases(other, other.generation)
    cost = warmup_excess(case, case.generation)
    if cost is None or not mine.steady or not theirs.steady or mine.unit != theirs.unit:
        return None
    paid = warmup_excess(other, other.generation)
    return break_even(cost.seconds, mine.steady, theirs.steady,
                      uncompiled_warmup_s=paid.seconds if paid is not None else None,
                      unit=mine.unit, caveat=_caveat(case, other))


def attach_break_evens(cases: Sequence[CaseResult]) -> None:
    """Set ``break_even`` on every compiled case of ``cases`` that has an uncompiled counterpart
    (and clear it where the counterpart is gone)."""
    for case in cases:
        if case.compile_backend:
            case.break_even = compile_break_even(case, cases)
