"""What this machine has and what is wrong with it: the data behind ``accelbench doctor``."""

from __future__ import annotations

from typing import Any

from accelbench.devices import DeviceSet
from accelbench.devices.cpuinfo import cpu_info
from accelbench.devices.environment import python_facts, torch_facts
from accelbench.devices.mps import current_mac_facts


def python_warnings(facts: dict[str, Any], rosetta: bool) -> list[str]:
    warnings = []
    if rosetta:
        warnings.append(
            "this Python is x86_64 running under Rosetta 2 on Apple silicon: MPS is invisible "
            "to it and everything runs slower; install a native arm64 Python"
        )
    if facts.get("pointer_bits") == 32:
        warnings.append("this is a 32-bit Python; torch needs a 64-bit Python")
    return warnings


def doctor_report(devices: DeviceSet | None = None) -> dict[str, Any]:
    devices = devices or DeviceSet.current()
    python = python_facts()
    mac = current_mac_facts()
    report: dict[str, Any] = {
        "python": python,
        "torch": torch_facts(),
        "cpu": cpu_info(),
        "devices": [],
        "warnings": python_warnings(python, mac.rosetta),
    }
    if mac.system == "Darwin":
        report["macos"] = {"version": mac.macos_version, "machine": mac.machine,
                           "rosetta": mac.rosetta}
    for kind, status in devices.availability.items():
        entry: dict[str, Any] = status.to_dict()
        if status.available:
            entry["instances"] = []
            for device in devices.available_devices():
                if device.kind != kind:
                    continue
                try:
                    entry["instances"].append({"device": device.name, **device.info()})
                except Exception as error:
                    entry["instances"].append({"device": device.name,
                                               "error": f"{type(error).__name__}: {error}"})
        report["devices"].append(entry)
    report["best_device"] = devices.best().name
    return report
