"""The outcome of one selftest check."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASS, FAIL, SKIP = "pass", "fail", "skip"
#: Within physical bounds only (no vendor figure to judge it by): no failure, and never a pass;
#: a card pinned at a tenth of its clocks would read the same (DESIGN.md, habit 13).
BOUNDS = "bounds"
STATUSES = (PASS, BOUNDS, FAIL, SKIP)
#: What a judged figure was held against (``CheckResult.basis``).
VENDOR_BASIS, BOUNDS_BASIS = "vendor", "bounds"


@dataclass(frozen=True)
class CheckResult:
    group: str
    name: str
    device: str
    status: str
    #: One line: what was measured against what was required (or why it was skipped / failed).
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)
    #: For a figure judged against a ceiling: VENDOR_BASIS (the datasheet's) or BOUNDS_BASIS
    #: (physical bounds only); "" for a check with its own criterion (timing, precision ...).
    basis: str = ""

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict(ok: bool, basis: str = "") -> str:
    """FAIL when not ``ok``; BOUNDS for a figure only physical bounds could judge; else PASS."""
    if not ok:
        return FAIL
    return BOUNDS if basis == BOUNDS_BASIS else PASS


def counts(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """How many checks ended in each status, and how many ceiling checks were judged against
    vendor figures and how many against physical bounds only (whatever their status)."""
    return {"status": {status: sum(c.get("status") == status for c in checks) for status in STATUSES},
            "judged": {"vendor": sum(c.get("basis") == VENDOR_BASIS for c in checks),
                       "bounds_only": sum(c.get("basis") == BOUNDS_BASIS for c in checks)}}


def crashed(group: str, name: str, device: str, error: BaseException) -> CheckResult:
    """A check that raised fails, with the error text: a selftest never hides a crash."""
    text = f"{type(error).__name__}: {error}".splitlines()[0]
    return CheckResult(group, name, device, FAIL, f"raised {text}")
