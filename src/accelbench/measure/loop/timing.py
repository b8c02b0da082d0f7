"""What the timed loop measures for one case, declared once: ``measure/loop/step_loop.py``'s StepLoop fills
a :class:`Timing`, and a case's result (``results/records.py``'s CaseResult) is one, so each field
is the same field in the loop, the record and the result file. Torch-free, so that results load
without torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass
class Timing:
    """The loop's samples and figures. Field order is the order of these keys in a result file."""

    #: Seconds per step, one value per sample; a sample averages ``steps_per_sample`` steps.
    step_times: list[float] = field(default_factory=list)
    steps_per_sample: int = 1
    warmup_steps: int = 0
    time_to_first_step_s: float | None = None
    warmup_time_s: float | None = None
    #: Seconds the device sat idle waiting for input over the measured steps (see input_wait.py).
    input_wait_s: float = 0.0
    measured_time_s: float = 0.0
    measured_steps: int = 0
    epoch_times: list[float] = field(default_factory=list)
    #: Seconds of the per-epoch work after the steps (e.g. a kNN evaluation), timed once when
    #: whole epochs did not run; it is added to the projected epoch time.
    epoch_end_s: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    #: How input_wait_s was measured (device idle from timing events, or host fetch time: one of
    #: input_wait.py's methods, or one of its upper bounds) and the host's own fetch time beside it.
    input_wait_method: str = ""
    input_fetch_s: float = 0.0
    #: The precision target (percent half-width of the median's 95% CI) of a time budget, if any
    #: (None when there was none), and why measuring stopped ("steps", "epochs", "time budget",
    #: "precision reached").
    target_ci_pct: float | None = None
    stop_reason: str = ""
    #: Seconds one synchronisation of the idle device took; windows are sized to hold at least
    #: 50 of them (asynchronous devices; None on the CPU).
    sync_s: float | None = None
    #: The device's peak memory over the set-up (building the model and the warm-up, where
    #: cuDNN's autotuning under cudnn.benchmark allocates a workspace per algorithm it tries),
    #: read where the steady state began (measure/trackers.MemoryTracker.steady_state); the
    #: case's ``peak_memory_bytes`` is the steady state's. None where not measured.
    setup_peak_memory_bytes: int | None = None

    def copy_into(self, target: Timing) -> None:
        """Give ``target`` (a case's result) these timing fields, and only these."""
        for spec in dataclasses.fields(Timing):
            setattr(target, spec.name, getattr(self, spec.name))
