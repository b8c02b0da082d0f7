"""The full environment a result was measured in: machine, OS, CPU, Python, torch, devices."""

from __future__ import annotations

import platform
import socket
import sys
from typing import Any

from accelbench import __version__
from accelbench.devices import DeviceSet
from accelbench.devices.power import power_state


def python_facts() -> dict[str, Any]:
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "architecture": platform.machine(),
        "pointer_bits": 64 if sys.maxsize > 2**32 else 32,
        "executable": sys.executable,
    }


def torch_facts() -> dict[str, Any]:
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    xpu_built = bool(getattr(getattr(torch, "xpu", None), "_is_compiled", lambda: False)())
    return {
        "version": torch.__version__,
        "cuda_build": torch.version.cuda,
        "hip_build": torch.version.hip,
        "cudnn": cudnn,
        "mps_built": bool(torch.backends.mps.is_built()),
        "xpu_built": xpu_built,
        "git_version": getattr(torch.version, "git_version", None),
        "debug_build": bool(getattr(torch.version, "debug", False)),
    }


def collect_environment(devices: DeviceSet | None = None) -> dict[str, Any]:
    devices = devices or DeviceSet.current()
    device_info = {}
    for device in devices.available_devices():
        try:
            device_info[device.name] = device.info()
        except Exception as error:  # a device that cannot describe itself is still a fact
            device_info[device.name] = {"error": f"{type(error).__name__}: {error}"}
    return {
        "machine": {
            "hostname": socket.gethostname(),
            "system": platform.system(),
            "release": platform.release(),
            "platform": platform.platform(),
            "architecture": platform.machine(),
        },
        "python": python_facts(),
        "torch": torch_facts(),
        "accelbench_version": __version__,
        "availability": {k: v.to_dict() for k, v in devices.availability.items()},
        "devices": device_info,
        # AC/battery, governor, OS power mode, GPU power limit: results move with them.
        "power": power_state(),
    }
