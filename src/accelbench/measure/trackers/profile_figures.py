"""The records ``--profile`` produces (``measure/trackers/profile.py``), declared without torch so that a
case's result (``results/``) holds them as they are; their dict form is the result file's
``profile`` section.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProfileFigures:
    """Per-step figures of the ``--profile`` steps (see measure/trackers/profile.py for how)."""

    steps: int
    #: "device" (kernel activity recorded), "cpu" (the CPU is the device) or "host-only"
    #: (an accelerator without profiler activity: only host-side op figures).
    source: str
    step_s: float
    busy_fraction: float | None
    kernels_per_step: float
    median_kernel_s: float | None
    #: (name, seconds per step) with the most device (CPU: self) time, largest first.
    top_ops: list[tuple[str, float]] = field(default_factory=list)
    allocated_bytes_per_step: float | None = None
    parameter_bytes: int = 0


@dataclass(frozen=True)
class Ceilings:
    """The device's roofline ceilings used by the diagnosis, or why they are missing."""

    memory_bandwidth_bytes_per_s: float | None = None
    launch_latency_s: float | None = None
    matmul_flops: dict[str, float | None] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class Profile:
    """``--profile``: the figures and the ceilings, or the error that stopped profiling."""

    figures: ProfileFigures | None = None
    ceilings: Ceilings | None = None
    error: str = ""
