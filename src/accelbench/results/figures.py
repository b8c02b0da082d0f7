"""The typed figures a case carries beside its timing: parity, energy, FLOP/s, sensors, scaling,
profile (whose records are declared where they are measured: measure/trackers/profile_figures.py). Each
is a small dataclass whose dict form is its section of the result file.

Numbers that could not be obtained are ``None`` (``null`` in the file), with the reason in the
record's ``reason`` or ``error``; a record is never a bag of optional keys. NaN is written as
``null`` (JSON has no NaN), which is why loss curves are ``list[float | None]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from accelbench.results.sustained import SustainedFigures
from accelbench.results.validate import Record, check_choice

PARITY_VERDICTS = ("pass", "drift", "diverged", "non-finite", "inconclusive", "failed")


@dataclass(frozen=True)
class ParityTolerance(Record):
    """Relative tolerances of a candidate precision (see parity.TOLERANCES)."""

    JSON_NAMES: ClassVar[dict[str, str]] = {"passed": "pass"}
    passed: float
    drift: float


@dataclass(frozen=True)
class Parity(Record):
    """``accelbench check``'s verdict for one case, with both loss curves (see parity/core.py)."""

    verdict: str
    steps: list[int] = field(default_factory=list)
    candidate: list[float | None] = field(default_factory=list)
    reference: list[float | None] = field(default_factory=list)
    #: The noise-floor run's curve: the reference re-run with a rounding of the candidate
    #: precision's size applied every step (the run that ended the judged steps; parity/core.py).
    noise_floor: list[float | None] = field(default_factory=list)
    #: How many leading steps the verdict judged (those before the noise floor left the ``pass``
    #: tolerance); None in records written before the noise floor existed (all steps judged).
    judged_steps: int | None = None
    #: "cpu-fp64" or "cpu": what the candidate was held against.
    reference_kind: str = ""
    #: Steps whose update the candidate's gradient scaler skipped (replayed as skipped on the
    #: reference).
    skipped_steps: list[int] = field(default_factory=list)
    tolerance: ParityTolerance | None = None
    first_bad_step: int | None = None
    max_rel_loss_diff: float | None = None
    output_rel_diff: float | None = None
    param_rel_diff: float | None = None
    #: With "non-finite": the first parameter or gradient that held NaN/Inf ("loss" if none).
    bad_tensor: str = ""
    #: With "failed": why the candidate did not run.
    error: str = ""

    def __post_init__(self) -> None:
        check_choice(self.verdict, PARITY_VERDICTS, "parity verdict")


@dataclass(frozen=True)
class Energy(Record):
    """Energy of the measured steps, or of a generation case's timed rounds (see
    measure/trackers/energy.py for what each source measures)."""

    source: str = ""
    #: Why there is no figure (not installed, not permitted, no sensor, window too short).
    reason: str = ""
    seconds: float = 0.0
    method: str = ""
    resolution: str = ""
    estimated: bool = False
    joules: float | None = None
    joules_per_step: float | None = None
    joules_per_epoch: float | None = None
    samples_per_joule: float | None = None
    #: A generation case's (None on a step case, whose figures are per step).
    joules_per_round: float | None = None
    joules_per_token: float | None = None


@dataclass(frozen=True)
class Flops(Record):
    """Achieved FLOP/s and the matrix-product peak it is held against (engine.measure_case.achieved_flops)."""

    peak_dtype: str = ""
    peak_precision: str = ""
    per_sample: float | None = None
    achieved_flops: float | None = None
    peak_flops: float | None = None
    peak_settings: str = ""
    peak_measured_at: str = ""
    peak_matrix_side: int | None = None
    peak_products_per_sync: int | None = None
    #: What held the clock back while the peak was timed (NVML's slowdown reasons: a capped
    #: peak) and the SM clock then; the short burst beside it; why it was measured on a busy
    #: machine ("" when not). measure/ceilings/peak.py PeakFigure.
    peak_limited_by: list[str] = field(default_factory=list)
    peak_clock_mhz: float | None = None
    peak_burst_flops: float | None = None
    peak_busy: str = ""
    #: A good peak's: why its latest re-check ran on a busy machine ("" when it did not, and in
    #: results written before it was recorded). render/peak_marks.py words all four marks.
    peak_recheck_busy: str = ""
    fraction_of_peak: float | None = None
    #: The sustained matrix-product peak ``roofline --sustained`` held (None: not measured), and
    #: the achieved FLOP/s as a share of it; ``fraction_of_peak`` stays against the burst peak.
    sustained_peak_flops: float | None = None
    fraction_of_sustained_peak: float | None = None
    error: str = ""


@dataclass(frozen=True)
class SensorReading(Record):
    """One reading of the clocks and temperatures (measure/trackers/sensors.py); None: not readable here."""

    cpu_mhz: float | None = None
    #: Why ``cpu_mhz`` is not read here ("not readable here: ..." on a VM's fixed figure).
    cpu_mhz_na: str = ""
    cpu_max_temperature_c: float | None = None
    gpu_temperature_c: float | None = None
    gpu_sm_clock_mhz: float | None = None
    error: str = ""


@dataclass(frozen=True)
class Sensors(Record):
    """Read just before and right after the measured steps (after warm-up, not at idle)."""

    start: SensorReading | None = None
    end: SensorReading | None = None


@dataclass
class ScaleRank(Record):
    """One torchrun rank's outcome and samples (None where the rank left no report)."""

    rank: int
    node_rank: int | None = None
    host: str | None = None
    device: str | None = None
    status: str = "ok"
    error: str = ""
    step_times: list[float] = field(default_factory=list)
    nosync_step_times: list[float] = field(default_factory=list)


@dataclass
class ScaleFigures(Record):
    """One world size of ``accelbench scale``, or of any case run under torchrun: made when its
    ranks are merged (engine/launchers/ranks.py); the efficiency filled in by scale/work.py."""

    world_size: int
    nproc_per_node: int = 1
    nnodes: int = 1
    backend: str = ""
    strategy: str = ""
    global_throughput: float | None = None
    per_process_throughput: float | None = None
    efficiency: float | None = None
    efficiency_baseline_world_size: int | None = None
    #: Share of the step spent communicating (1 - no-sync median / synced median).
    comm_fraction: float | None = None
    ranks: list[ScaleRank] = field(default_factory=list)
    #: Every rank finished but torchrun then exited non-zero (a teardown crash): figures stand.
    teardown_warning: str = ""
    #: torchrun's last output lines, kept when the world size failed or warned.
    output_tail: list[str] = field(default_factory=list)


@dataclass
class ProcessRun(Record):
    """One worker process of a case measured ``--repeat N`` times (as pyperf's ``Run``): its raw
    samples and the figures derived from them, made by engine/repeat.py. ``CaseResult.repeats``
    holds one per process; each is an independent measurement, the unit ``compare`` judges."""

    status: str = "ok"
    error: str = ""
    batch_size: int = 0
    step_times: list[float] = field(default_factory=list)
    steps_per_sample: int = 1
    epoch_times: list[float] = field(default_factory=list)
    measured_steps: int = 0
    measured_time_s: float = 0.0
    input_wait_s: float = 0.0
    time_to_first_step_s: float | None = None
    warmup_time_s: float | None = None
    peak_memory_bytes: int | None = None
    median_step_s: float | None = None
    mean_step_s: float | None = None
    #: A generation case's per-process figure (results/process.py): its TPOT; None otherwise.
    tpot_s: float | None = None
    #: A --protocol case's per-process figure: this process's own protocol rate (its catalogue
    #: headline: llama-bench's pp or tg mean, gpt-fast's tokens/s, MLPerf Client's 2nd+ token
    #: rate); None otherwise, and in files written before it was kept.
    protocol_rate: float | None = None
    #: --sustained: this process's own burst/sustained figures and verdict; None otherwise.
    sustained: SustainedFigures | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"
