"""Run every selftest check group on a device; a check that raises is a failure with its error."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from accelbench import __version__
from accelbench.devices import Device, DeviceSet
from accelbench.selftest.result import CheckResult, counts, crashed

GROUPS = ("timing", "peak", "precision", "memory", "parity")
Check = Callable[[], "CheckResult | list[CheckResult]"]


def _checks(group: str, device: Device, devices: DeviceSet, quick: bool) -> list[Check]:
    if group == "timing":
        from accelbench.selftest.timing import timing_checks
        return list(timing_checks(device, quick))
    if group == "peak":
        from accelbench.selftest.ceilings import ceiling_checks
        return list(ceiling_checks(device, quick))
    if group == "precision":
        from accelbench.selftest.precision import precision_checks
        return list(precision_checks(device, quick))
    if group == "memory":
        from accelbench.selftest.memory import memory_checks
        return list(memory_checks(device, quick))
    from accelbench.selftest.parity import parity_checks
    return list(parity_checks(device, devices, quick))


def run_selftest(devices: DeviceSet, chosen: list[Device], groups: tuple[str, ...] = GROUPS,
                 quick: bool = False,
                 on_result: Callable[[CheckResult], None] | None = None) -> dict[str, Any]:
    """Every check of ``groups`` on each chosen device; returns the JSON-ready summary."""
    started = time.perf_counter()
    results: list[CheckResult] = []
    for device in chosen:
        # The device is current for its checks (a timing event records on the current device's
        # stream: selftest on cuda:1 would time GPU 0), and the one before it is current again
        # after, so a check that makes its device current (parity's) cannot leak into the next.
        with device.current():
            for group in groups:
                for check in _checks(group, device, devices, quick):
                    try:
                        outcome = check()
                    except Exception as error:  # a crashing check is a failing check
                        outcome = crashed(group, f"{group} checks", device.name, error)
                    for result in outcome if isinstance(outcome, list) else [outcome]:
                        results.append(result)
                        if on_result is not None:
                            on_result(result)
    checks = [r.to_dict() for r in results]
    return {
        "kind": "selftest", "accelbench_version": __version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "devices": [d.name for d in chosen], "groups": list(groups), "quick": quick,
        "passed": not any(r.failed for r in results),
        "wall_time_s": time.perf_counter() - started,
        # each status, and the ceiling checks judged against vendor figures / bounds only
        **counts(checks),
        "checks": checks,
    }
