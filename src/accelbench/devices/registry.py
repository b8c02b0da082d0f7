"""Discover device kinds and turn a ``--device`` string into Devices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.devices.base import Availability, Device, DeviceAdapter
from accelbench.devices.cpu import CpuAdapter
from accelbench.devices.cuda import CudaAdapter
from accelbench.devices.generic import GenericAcceleratorAdapter
from accelbench.devices.kinds import DEVICE_ALIASES, DEVICE_HELP, KNOWN_KINDS
from accelbench.devices.mps import MpsAdapter
from accelbench.devices.xpu import XpuAdapter
from accelbench.errors import DeviceUnavailableError, UsageError, did_you_mean


def discover(torch_module: Any = None) -> list[DeviceAdapter]:
    """Every device kind this build could know: cpu, cuda, xpu, mps and any other accelerator."""
    if torch_module is None:
        import torch as torch_module
    adapters: list[DeviceAdapter] = [
        CpuAdapter(),
        CudaAdapter(torch_module),
        XpuAdapter(torch_module),
        MpsAdapter(torch_module),
    ]
    other = _other_accelerator(torch_module)
    if other:
        adapters.append(GenericAcceleratorAdapter(other, torch_module))
    return adapters


def _other_accelerator(torch_module: Any) -> str | None:
    accelerator = getattr(torch_module, "accelerator", None)
    if accelerator is None:
        return None
    try:
        current = accelerator.current_accelerator()
    except RuntimeError:
        return None
    if current is None or current.type in KNOWN_KINDS or current.type == "cpu":
        return None
    return str(current.type)


class DeviceSet:
    """The adapters of this process with their availability, computed once."""

    def __init__(self, adapters: Sequence[DeviceAdapter]) -> None:
        self.adapters = {a.kind: a for a in adapters}
        self.availability: dict[str, Availability] = {
            kind: adapter.availability() for kind, adapter in self.adapters.items()
        }

    @classmethod
    def current(cls) -> DeviceSet:
        return cls(discover())

    def available_devices(self) -> list[Device]:
        devices: list[Device] = []
        for kind, status in self.availability.items():
            if status.available:
                devices.extend(
                    Device(self.adapters[kind], kind, i) for i in range(max(status.count, 1))
                )
        return devices

    def best(self) -> Device:
        for kind in (*KNOWN_KINDS, *self.adapters):
            status = self.availability.get(kind)
            if kind != "cpu" and status is not None and status.available:
                return Device(self.adapters[kind], kind, 0)
        return Device(self.adapters["cpu"], "cpu", 0)

    def select(self, spec: str) -> list[Device]:
        """Parse ``--device``: names, ``kind:index``, ``auto``, ``all``, comma lists."""
        chosen: list[Device] = []
        items = [item.strip().lower() for item in spec.split(",")]
        if not spec.strip() or any(not item for item in items):
            raise UsageError(f"--device {spec!r} is empty or has an empty item; allowed: "
                             f"{DEVICE_HELP}")
        for item in items:
            for device in self._select_one(item):
                if device not in chosen:
                    chosen.append(device)
        return chosen

    def _select_one(self, item: str) -> list[Device]:
        if item == "auto":
            return [self.best()]
        if item == "all":
            return self.available_devices()
        kind, _, index_text = item.partition(":")
        if kind not in self.adapters:
            known = sorted({*self.adapters, *KNOWN_KINDS})
            raise UsageError(f"unknown device {item!r}{did_you_mean(kind, known, DEVICE_ALIASES)}; "
                             f"known kinds: {', '.join(known)} "
                             f"(allowed: {DEVICE_HELP})")
        if index_text and not index_text.isdigit():
            raise UsageError(f"device index in {item!r} must be a non-negative whole number")
        index = int(index_text) if index_text else 0
        status = self.availability[kind]
        if not status.available:
            raise DeviceUnavailableError(
                f"device {item!r} is not available: {status.reason}"
                + (f" (fix: {status.fix})" if status.fix else "")
            )
        if kind == "cpu" and index != 0:
            raise UsageError(f"device {item!r}: the CPU is one device, use 'cpu'")
        if index >= status.count:
            raise DeviceUnavailableError(
                f"device {item!r} is not available: this machine has {status.count} {kind} "
                f"device(s) ({', '.join(f'{kind}:{i}' for i in range(status.count))})"
            )
        return [Device(self.adapters[kind], kind, index)]
