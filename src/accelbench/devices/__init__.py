"""Device adapters: the only place that knows how CPU, CUDA, MPS and XPU differ.

The adapters and the device set are loaded on first use (they import torch), so option parsing
that needs only ``DEVICE_HELP`` starts without torch.
"""

from __future__ import annotations

from typing import Any

from accelbench.devices.kinds import DEVICE_HELP, KNOWN_KINDS

_FROM_BASE = ("Availability", "Device", "DeviceAdapter")
_FROM_REGISTRY = ("DeviceSet", "discover")

__all__ = ["DEVICE_HELP", "KNOWN_KINDS", *_FROM_BASE, *_FROM_REGISTRY]


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from accelbench.devices import base

        return getattr(base, name)
    if name in _FROM_REGISTRY:
        from accelbench.devices import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'accelbench.devices' has no attribute {name!r}")
