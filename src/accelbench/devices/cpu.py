"""The CPU: always available; peak memory is the process's peak resident set size."""

from __future__ import annotations

import os
import platform
import resource
from pathlib import Path
from typing import Any

from accelbench.devices.base import Availability, DeviceAdapter

_PROC_SELF = Path("/proc/self")


class CpuAdapter(DeviceAdapter):
    kind = "cpu"
    is_async = False
    memory_source = "process peak RSS"
    distributed_backend = "gloo"
    # RAPL on Linux (Intel and AMD), powermetrics on macOS; whichever is readable.
    energy_sources = ("rapl", "powermetrics-cpu")

    def __init__(self, proc_self: Path = _PROC_SELF) -> None:
        self._proc = proc_self

    def availability(self) -> Availability:
        return Availability(kind="cpu", available=True, count=1)

    def synchronize(self, index: int) -> None:
        # CPU kernels run synchronously in the calling thread: nothing is queued.
        return None

    def reset_peak_memory(self, index: int) -> bool:
        # Linux >= 4.0 resets VmHWM (the peak RSS) when "5" is written to clear_refs; elsewhere
        # (macOS) the peak is the process's lifetime ru_maxrss, which nothing resets.
        try:
            (self._proc / "clear_refs").write_text("5")
        except OSError:
            return False
        return True

    def peak_memory_bytes(self, index: int) -> int | None:
        try:
            for line in (self._proc / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        # ru_maxrss is the lifetime peak: KiB on Linux, bytes on macOS.
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if platform.system() == "Darwin" else peak * 1024

    def torch_device(self, index: int) -> str:
        return "cpu"

    def info(self, index: int) -> dict[str, Any]:
        from accelbench.devices.cpuinfo import cpu_info

        return cpu_info()


def logical_cpu_count() -> int:
    return os.cpu_count() or 1
