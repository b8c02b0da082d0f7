"""What the CPU is and how torch will use it (model, cores, threads, BLAS, oneDNN), and whether
its clock can be read live here."""

from __future__ import annotations

import functools
import platform
import re
from pathlib import Path
from typing import Any

import psutil


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        import subprocess

        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True, text=True, timeout=5, check=False,
            )
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


def parse_parallel_info(text: str) -> dict[str, Any]:
    """Pull the facts users care about out of ``torch.__config__.parallel_info()``."""
    facts: dict[str, Any] = {}
    backend = re.search(r"ATen parallel backend:\s*(.+)", text)
    if backend:
        facts["parallel_backend"] = backend.group(1).strip()
    interop = re.search(r"at::get_num_interop_threads\(\)\s*:\s*(\d+)", text)
    if interop:
        facts["interop_threads"] = int(interop.group(1))
    for line in text.splitlines():
        stripped = line.strip()
        if "Math Kernel Library" in stripped or stripped.startswith("OpenBLAS"):
            facts["blas"] = stripped
        elif "MKL-DNN" in stripped or "oneDNN" in stripped:
            facts["onednn"] = stripped
    return facts


def last_level_cache_bytes(caches: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    """The largest cache of CPU 0 (sysfs ``indexN/size``, e.g. "32768K"); None where unreadable."""
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    sizes = []
    for entry in caches.glob("index*/size"):
        try:
            text = entry.read_text().strip()
            sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
        except (OSError, ValueError, IndexError):
            continue
    return max(sizes) if sizes else None


def cpu_info() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "name": cpu_model(),
        "architecture": platform.machine(),
        "physical_cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True),
        "torch_threads": torch.get_num_threads(),
        "memory_total_bytes": psutil.virtual_memory().total,
        "memory_free_bytes": psutil.virtual_memory().available,
        "onednn_available": bool(torch.backends.mkldnn.is_available()),
        "openmp_available": bool(torch.backends.openmp.is_available()),
        "last_level_cache_bytes": last_level_cache_bytes(),
    }
    info.update(parse_parallel_info(torch.__config__.parallel_info()))
    return info


CPU_SYSFS = Path("/sys/devices/system/cpu")
CPUINFO = Path("/proc/cpuinfo")


def _hypervisor_flag(cpuinfo: Path) -> bool:
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    return any(line.startswith("flags") and " hypervisor" in f" {line.split(':', 1)[-1]} "
               for line in text.splitlines())


@functools.lru_cache(maxsize=8)
def cpu_clock_unreadable(system: str | None = None, sysfs: Path = CPU_SYSFS,
                         cpuinfo: Path = CPUINFO) -> str:
    """Why ``psutil.cpu_freq()`` is not a live reading of the CPU's clock here, or "" when it
    is (read once per process: the answer is the machine's).

    On Linux psutil reads cpufreq's ``scaling_cur_freq`` when sysfs has cpufreq (``cpu0/cpufreq``
    or ``cpufreq/policy0``, as psutil checks) and otherwise falls back to ``/proc/cpuinfo``'s
    ``cpu MHz``, which a VM fills with a fixed figure; a guest (the ``hypervisor`` flag) sees no
    host clock either way. On macOS psutil gives the nominal frequency (sysctl), never the clock.
    """
    system = system or platform.system()
    if system == "Darwin":
        return "psutil gives macOS's nominal CPU frequency (sysctl), a fixed figure, not the clock"
    if system != "Linux":
        return ""
    guest = _hypervisor_flag(cpuinfo)
    if not ((sysfs / "cpu0" / "cpufreq").is_dir() or (sysfs / "cpufreq" / "policy0").is_dir()):
        return (f"no cpufreq in {sysfs} (scaling_cur_freq), so psutil's figure is {cpuinfo}'s "
                "fixed 'cpu MHz'" + (", a VM (the CPU's hypervisor flag)" if guest else ""))
    if guest:
        return ("a VM (the CPU's hypervisor flag): the guest's cpufreq figure is not the host "
                "CPU's clock")
    return ""
