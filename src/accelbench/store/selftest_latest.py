"""The latest selftest outcome per device, kept in the data folder, so that a shared result can say
whether ``accelbench selftest`` passed on the machine that measured it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelbench.files import data_home, write_atomic

LATEST_FILE = "selftest-latest.json"


def latest_path() -> Path:
    return data_home() / LATEST_FILE


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: "not run" is the honest answer
    return data if isinstance(data, dict) else {}


def record_selftest(summary: dict[str, Any]) -> None:
    """Keep each tested device's outcome (pass = no failed check on it), replacing its last one."""
    path = latest_path()
    latest = _read(path)
    for device in summary.get("devices", []):
        checks = [c for c in summary.get("checks", []) if c.get("device") == device]
        latest[str(device)] = {
            "passed": not any(c.get("status") == "fail" for c in checks) and bool(checks),
            "date": summary.get("created_at", ""), "accelbench_version": summary.get("accelbench_version"),
            "groups": summary.get("groups", []), "quick": summary.get("quick", False)}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(latest, indent=1) + "\n")


def latest_selftest(device: str) -> dict[str, Any] | None:
    """The last selftest outcome of ``device`` ("cuda:0"), or of its kind's first device."""
    latest = _read(latest_path())
    found = latest.get(device)
    if found is None:
        kind = device.split(":", 1)[0]
        found = next((v for k, v in sorted(latest.items()) if k.split(":", 1)[0] == kind), None)
    return found if isinstance(found, dict) else None
