"""Device adapters: the only place that knows how CPU, CUDA, MPS and XPU differ."""

from accelbench.devices.base import Availability, Device, DeviceAdapter
from accelbench.devices.registry import DEVICE_HELP, DeviceSet, discover

__all__ = ["DEVICE_HELP", "Availability", "Device", "DeviceAdapter", "DeviceSet", "discover"]
