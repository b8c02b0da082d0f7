"""Apple's Metal Performance Shaders back end.

MPS needs macOS >= 12.3, a native arm64 Python (an x86_64 Python under Rosetta sees no MPS) and a
torch built with MPS.

Peak memory: torch releases that wire the MPS allocator into ``torch.accelerator``'s memory
statistics keep a true peak (``allocated_bytes.all.peak``), and that is used. Older ones have only
``torch.mps.current_allocated_memory()``; sampled at synchronisations (step boundaries, after the
step's activations are freed) it sees little more than parameters and optimiser state, so that
figure is labelled a lower bound. ``driver_allocated_memory()`` is no substitute: it is the
allocator's reserved pool (cache included), the analogue of CUDA's reserved memory.
"""

from __future__ import annotations

import platform
import subprocess
from dataclasses import dataclass
from typing import Any

from accelbench.devices.base import Availability, DeviceAdapter

MIN_MACOS = (12, 3)


@dataclass(frozen=True)
class MacFacts:
    system: str
    machine: str
    macos_version: str
    rosetta: bool


def running_under_rosetta() -> bool:
    """True when this process is an x86_64 binary translated by Rosetta 2."""
    try:
        out = subprocess.run(
            ["sysctl", "-n", "sysctl.proc_translated"],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return out.stdout.strip() == "1"


def current_mac_facts() -> MacFacts:
    system = platform.system()
    return MacFacts(
        system=system,
        machine=platform.machine(),
        macos_version=platform.mac_ver()[0] if system == "Darwin" else "",
        rosetta=running_under_rosetta() if system == "Darwin" else False,
    )


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


COUNTED_SOURCE = "MPS allocator peak (torch.accelerator.max_memory_allocated: live tensors)"
SAMPLED_SOURCE = ("MPS live tensors sampled at step boundaries (torch.mps.current_allocated_memory;"
                  " a lower bound: this torch keeps no MPS peak)")
UNKNOWN_SOURCE = "MPS allocator peak where torch keeps one, else live tensors sampled (lower bound)"


class MpsAdapter(DeviceAdapter):
    kind = "mps"
    # torch maps mps to gloo; whether gloo takes MPS tensors is checked before a launch.
    distributed_backend = "gloo"
    # The GPU shares the SoC with the CPU cores that drive it: both are counted.
    energy_sources = ("powermetrics-cpu-gpu",)
    # MPS's timing events (aten/src/ATen/mps/MPSEvent.mm, MPSGuardImpl.mm) disturb and fail the
    # loop they would time: every record commits the command buffer (MPSGuardImpl::record passes
    # syncEvent=true); elapsed_time raises unless the end's timestamp is after the start's (torch
    # releases with `end_time > start_time` raise for two events that complete together, as the
    # pair around a fetch does in a device-bound step); before the per-record "generation" fix,
    # an event recorded again could read its previous recording's timestamp; and reading one
    # waits for the whole stream (COMMIT_AND_WAIT).
    step_events_safe = False

    def __init__(self, torch_module: Any = None, facts: MacFacts | None = None) -> None:
        if torch_module is None:
            import torch as torch_module
        self._torch = torch_module
        self._facts = facts
        self._peak = 0
        #: Whether the last peak came from torch's counter (None: not read yet).
        self._counted: bool | None = None

    @property
    def memory_source(self) -> str:  # type: ignore[override]  # read-only over the base's class attribute
        if self._counted is None:
            return UNKNOWN_SOURCE
        return COUNTED_SOURCE if self._counted else SAMPLED_SOURCE

    @property
    def memory_is_lower_bound(self) -> bool:  # type: ignore[override]  # as memory_source
        return self._counted is not True

    @property
    def facts(self) -> MacFacts:
        if self._facts is None:
            self._facts = current_mac_facts()
        return self._facts

    def availability(self) -> Availability:
        facts = self.facts
        built = bool(self._torch.backends.mps.is_built())
        if facts.system != "Darwin":
            return Availability("mps", False, built=built,
                                reason=f"MPS exists only on macOS; this is {facts.system}",
                                fix="run on a Mac with Apple silicon")
        if facts.rosetta:
            return Availability(
                "mps", False, built=built,
                reason="this Python is x86_64 running under Rosetta on Apple silicon; "
                "MPS needs a native arm64 Python",
                fix="install an arm64 Python (platform.machine() must print 'arm64') "
                "and reinstall torch in it",
            )
        version = _version_tuple(facts.macos_version)
        if version and version < MIN_MACOS:
            return Availability("mps", False, built=built,
                                reason=f"macOS {facts.macos_version} is too old; "
                                "MPS needs macOS 12.3 or later",
                                fix="update macOS to 12.3 or later")
        if not built:
            return Availability("mps", False, built=False,
                                reason="this torch build has no MPS support",
                                fix="install torch >= 1.12 for macOS arm64")
        if not self._torch.backends.mps.is_available():
            return Availability("mps", False,
                                reason="torch is built with MPS but no Metal GPU is usable",
                                fix="MPS needs Apple silicon or a Metal-capable AMD GPU")
        return Availability("mps", True, count=1)

    def synchronize(self, index: int) -> None:
        self._torch.mps.synchronize()
        self._peak = max(self._peak, int(self._torch.mps.current_allocated_memory()))

    def reset_peak_memory(self, index: int) -> bool:
        """torch's MPS peak where this torch keeps one, and the sampled peak; False where torch's
        counter is read (peak_memory_bytes) but could not be reset."""
        self._peak = int(self._torch.mps.current_allocated_memory())
        reset = getattr(getattr(self._torch, "accelerator", None), "reset_peak_memory_stats", None)
        if reset is None:
            return True  # no counter of torch's: the sampled peak, just reset, is the figure
        try:
            reset(index)
        except (RuntimeError, NotImplementedError, ValueError):
            return self._counted_peak(index) is None
        return True

    def _counted_peak(self, index: int) -> int | None:
        """torch's own MPS peak where this torch keeps one; None where it does not (no
        torch.accelerator memory API, an error, or statistics that stay empty or zero)."""
        stats_of = getattr(getattr(self._torch, "accelerator", None), "memory_stats", None)
        if stats_of is None:
            return None
        try:
            peak = stats_of(index).get("allocated_bytes.all.peak")
        except (RuntimeError, NotImplementedError, ValueError, AttributeError):
            return None
        return int(peak) if peak else None

    def peak_memory_bytes(self, index: int) -> int | None:
        counted = self._counted_peak(index)
        self._counted = counted is not None
        if counted is not None:
            return counted
        return max(self._peak, int(self._torch.mps.current_allocated_memory()))

    def info(self, index: int) -> dict[str, Any]:
        import psutil

        from accelbench.devices.cpuinfo import cpu_model

        info: dict[str, Any] = {
            "name": gpu_name(cpu_model(), apple_silicon=self.facts.machine == "arm64"),
            # Unified memory: the GPU shares the machine's RAM.
            "memory_total_bytes": psutil.virtual_memory().total,
            "macos_version": self.facts.macos_version,
        }
        recommended = getattr(self._torch.mps, "recommended_max_memory", None)
        if recommended is not None:
            info["memory_recommended_max_bytes"] = int(recommended())
        return info


def gpu_name(cpu: str, apple_silicon: bool) -> str:
    """The MPS device's name from the Mac's CPU brand string. On Apple silicon the GPU is part of
    the chip that string names ("Apple M1 Pro" -> "Apple M1 Pro GPU (MPS)", which selftest's
    vendor table finds the chip by); where the brand string could not be read (cpu_model then
    falls back to "arm") the chip is not guessed. An Intel Mac's brand string names only its
    CPU, so its GPU is not named after it."""
    cpu = cpu.strip()
    if cpu.lower().startswith("apple"):
        return f"{cpu} GPU (MPS)"
    if apple_silicon:
        return "Apple silicon GPU (MPS)"
    return f"Metal GPU (MPS) on a Mac with {cpu}" if cpu else "Metal GPU (MPS)"
