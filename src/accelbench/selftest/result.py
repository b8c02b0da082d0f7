"""The outcome of one selftest check."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class CheckResult:
    group: str
    name: str
    device: str
    status: str
    #: One line: what was measured against what was required (or why it was skipped / failed).
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict(ok: bool) -> str:
    return PASS if ok else FAIL


def crashed(group: str, name: str, device: str, error: BaseException) -> CheckResult:
    """A check that raised fails, with the error text: a selftest never hides a crash."""
    text = f"{type(error).__name__}: {error}".splitlines()[0]
    return CheckResult(group, name, device, FAIL, f"raised {text}")
