"""What the CPU is and how torch will use it (model, cores, threads, BLAS, oneDNN)."""

from __future__ import annotations

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
