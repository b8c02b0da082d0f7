"""Parity check: the quick suite passes ``accelbench check`` on the device (tiny sizes, few steps),
through the same library call the command makes."""

from __future__ import annotations

from collections.abc import Callable

from accelbench.devices import Device, DeviceSet
from accelbench.options import RunOptions
from accelbench.selftest.result import CheckResult, verdict
from accelbench.workloads.suites import suite_workloads

GROUP = "parity"
STEPS = 5


def check_quick_suite_parity(device: Device, devices: DeviceSet, steps: int = STEPS) -> list[CheckResult]:
    from accelbench.options.check import CheckOptions
    from accelbench.parity.check import run_check
    from accelbench.parity.shown import judged_label, verdict_of

    options = CheckOptions(RunOptions(workloads=suite_workloads("quick"), device=device.name,
                                      modes=("train",), size="tiny", isolation="none"),
                           steps=steps)
    # The device object itself (a test's planted fault included), not a fresh lookup by name.
    record = run_check(options, _Only(devices, device), ["accelbench", "selftest"])
    results = []
    for case in record.cases:
        parity = case.parity
        detail = f"{verdict_of(case)} over {steps} steps"
        if judged_label(parity):
            detail += f" (judged {judged_label(parity)}: later steps amplify rounding)"
        if parity is not None and parity.max_rel_loss_diff is not None:
            detail += f", max relative loss difference {parity.max_rel_loss_diff:.2e}"
        if case.error:
            detail += f": {case.error}"
        results.append(CheckResult(GROUP, f"{case.workload} passes check (tiny)", device.name,
                                   # "inconclusive" judged no step: it proves nothing.
                                   verdict(case.ok and verdict_of(case) in ("pass", "drift")), detail,
                                   {"parity": parity.to_dict() if parity else {}}))
    return results


class _Only(DeviceSet):
    """A device set whose selection is the one device under test (its CPU stays the reference)."""

    def __init__(self, devices: DeviceSet, device: Device) -> None:
        self.__dict__.update(devices.__dict__)
        self._device = device

    def select(self, spec: str) -> list[Device]:
        return [self._device] if spec == self._device.name else super().select(spec)


def parity_checks(device: Device, devices: DeviceSet,
                  quick: bool = False) -> list[Callable[[], list[CheckResult]]]:
    return [lambda: check_quick_suite_parity(device, devices)]
