"""How a check case's outcome reads, in the table, the selftest line and anywhere else: the
verdict (or the status of a candidate that never finished) and how many steps were judged."""

from __future__ import annotations

from accelbench.results import CaseResult, Parity


def verdict_of(case: CaseResult) -> str:
    """The parity verdict, or, for a case whose candidate never finished (crashed, timeout, oom,
    unsupported, interrupted ...), that status: "failed" would say less than is known."""
    parity = case.parity
    if parity is not None and parity.verdict != "failed":
        return parity.verdict
    return case.status if case.status not in ("ok", "failed") else "failed"


def judged_label(parity: Parity | None) -> str:
    """``20 of 50`` where the noise floor ended the judged steps early; empty when all were."""
    if parity is None or parity.judged_steps is None or parity.judged_steps >= len(parity.steps):
        return ""
    return f"{parity.judged_steps} of {len(parity.steps)}"
