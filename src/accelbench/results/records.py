"""CaseResult (one case: raw samples, typed figures) and RunRecord (one invocation).

Derived statistics (the summary, the median's precision, drift) are computed from the raw samples
once and kept until the samples change: the runner and the repeat merge assign ``step_times``
after construction, and the timed loop appends to it, so the cache is keyed by the samples
themselves rather than cleared by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from accelbench.errors import UsageError
from accelbench.measure.loop.median_ci import relative_median_ci_half_width
from accelbench.measure.loop.timing import Timing
from accelbench.measure.trackers.profile_figures import Profile
from accelbench.options.recorded import Recorded, from_stored
from accelbench.results.case_key import CaseKey
from accelbench.results.catalogue import case_figures, case_headline
from accelbench.results.figures import Energy, Flops, Parity, ProcessRun, ScaleFigures, Sensors
from accelbench.results.first_use import BreakEven, FirstUse, Start
from accelbench.results.generation import Generation, protocol_rate_ci
from accelbench.results.probe import DeviceProbe
from accelbench.results.protocol_overall import Overall
from accelbench.results.schema import SCHEMA_VERSION, upgrade
from accelbench.results.stats import Summary, drift, geometric_ci, mean_ci, summarize
from accelbench.results.sustained import SustainedRecord
from accelbench.results.validate import build, dump, field_path

#: A case is input-bound when waiting for batches takes more than this share of its step time:
#: the loader, not the device, then limits throughput.
INPUT_BOUND_FRACTION = 0.2
#: The case's sections that write their own JSON form (``to_dict``).
SECTIONS = ("generation", "break_even", "start")
STATUSES = ("ok", "failed", "oom", "nan", "unsupported", "unavailable", "crashed", "timeout",
            "interrupted")

T = TypeVar("T")


class _SampleCache:
    """Figures derived from one list of samples, valid while the samples are the same values."""

    def __init__(self) -> None:
        self.key: tuple[float, ...] | None = None
        self.values: dict[str, Any] = {}

    def get(self, samples: Sequence[float], name: str, compute: Callable[[Sequence[float]], T]) -> T:
        key = tuple(samples)  # cheap next to the statistics: a C-level copy and compare
        if key != self.key:
            self.key, self.values = key, {}
        if name not in self.values:
            self.values[name] = compute(samples)
        return self.values[name]


#: The order in which a result file lists the case's head (the key's fields among the rest, as
#: files have always had them); the other fields follow in their declared order.
_FILE_ORDER = ("workload", "mode", "device", "batch_size", "workload_version", "device_name",
               "precision", "compile_backend", "channels_last", "data", "size", "status", "error",
               "threads", "stop_rule", "dataset_size", "steps_per_epoch", "prompt_len", "new_tokens",
               "tokens_per_sample", "streamed", "protocol")


@dataclass
class _CaseHead(CaseKey):
    """The fields a result file lists before the timing: what ran (the key's fields, from
    ``CaseKey``, and the device), and how it ended."""

    device: str
    device_name: str = ""
    status: str = "ok"
    error: str = ""
    threads: int = 0
    stop_rule: str = ""
    dataset_size: int = 0
    steps_per_epoch: int = 0
    #: Decoders' training and eval: tokens in one sample (its sequence), so tokens/s = samples/s
    #: x this; None where a sample is not tokens.
    tokens_per_sample: int | None = None


def rate_unit(mode: str) -> str:
    """What ``CaseResult.throughput()`` counts for a case of ``mode``: a generation case's step
    samples are its decode steps, so its rate is decode tokens/s over the batch."""
    return "decode tokens/s" if mode == "generate" else "samples/s"


# A dataclass lists its bases' fields from the last base to the first, then its own: the head,
# the loop's timing (measure/loop/timing.py, declared there once), then the rest, as the file has them.
@dataclass
class CaseResult(Timing, _CaseHead):
    """One workload x device x mode x precision, with raw samples, typed figures and derived ones."""

    JSON_ORDER: ClassVar[tuple[str, ...]] = _FILE_ORDER
    #: Written for readers, recomputed on load: not a field, and not an unknown key.
    JSON_EXTRA: ClassVar[tuple[str, ...]] = ("derived",)

    peak_memory_bytes: int | None = None
    memory_source: str = ""
    #: True where the device's peak can be below the true one (MPS sampled): shown as "≥".
    memory_is_lower_bound: bool = False
    #: With --repeat N: one ProcessRun per worker process (its samples and figures, see
    #: engine/repeat.py); the fields above are then the pooled view. Empty for a single process.
    repeats: list[ProcessRun] = field(default_factory=list)
    # --- typed figures (results/figures.py); None where the case has none -----------------------
    parity: Parity | None = None
    energy: Energy | None = None
    flops: Flops | None = None
    sensors: Sensors | None = None
    scale: ScaleFigures | None = None
    profile: Profile | None = None
    #: Mode "generate": the figures of its timed rounds (time to first token, prefill and decode
    #: tokens/s, inter-token latency, KV cache, bytes/token) and the sections beside them
    #: (results/generation.py); ``check --mode generate``: the parity verdict alone.
    generation: Generation | None = None
    #: --sustained: the time series and its verdict (burst, sustained, their ratio with its
    #: interval, holds / throttles / can't tell, cause).
    sustained: SustainedRecord | None = None
    #: A compiled case run beside the same work uncompiled (--compile inductor,none): when the
    #: compile time is made up (results/pairs.py).
    break_even: BreakEven | None = None
    #: How the case began (cases before it in its process, the compile caches, their switches
    #: and lookups); None in results from before.
    start: Start | None = None
    #: The global numeric switches in force (TF32, cuDNN benchmark, determinism: precision.py).
    backend_flags: dict[str, str | bool] = field(default_factory=dict)
    # --- how the case ran or failed ---------------------------------------------------------------
    #: --auto-batch: the batch sizes that ran out of memory before this one fitted.
    oom_batch_sizes: list[int] = field(default_factory=list)
    #: Status "nan": the step whose loss was not finite.
    nonfinite_step: int | None = None
    traceback: str = ""
    #: A crashed worker process's last stderr lines.
    stderr_tail: list[str] = field(default_factory=list)
    #: accelbench.bench(): "process", or "inline: " and why the model could not go to a worker.
    isolation: str = ""
    #: A sweep's batch size not run because a smaller one already ran out of memory.
    skipped: bool = False

    # --- derived figures (computed once per set of samples) ---------------------------------------
    def _cache(self, name: str) -> _SampleCache:
        caches: dict[str, _SampleCache] = self.__dict__.setdefault("_derived", {})
        return caches.setdefault(name, _SampleCache())

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def summary(self) -> Summary | None:
        if not self.step_times:
            return None
        return self._cache("step_times").get(self.step_times, "summary", summarize)

    def throughput(self) -> float | None:
        """The case's headline rate (results/catalogue.headline): samples per second at the
        median step time; for a generation case the stored decode tokens per second over the
        batch, B / median TPOT (``rate_unit``), the figure its generation table shows, or a
        --protocol case's stored rate as its peer publishes it (llama-bench's pp or tg ...)."""
        if self.mode == "generate":
            return _positive(case_headline(self).read(self))
        summary = self.summary()
        return self.batch_size / summary.median if summary else None

    def rate_unit(self) -> str:
        """What ``throughput()`` counts: ``rate_unit(mode)``, or a --protocol case's own rate."""
        if self.protocol and self.mode == "generate":
            return case_headline(self).label
        return rate_unit(self.mode)

    def tokens_per_s(self) -> float | None:
        """Training and eval of a decoder: tokens per second (samples/s x sequence length)."""
        rate = self.throughput()
        return rate * self.tokens_per_sample if rate and self.tokens_per_sample else None

    def throughput_ci(self) -> tuple[float, float] | None:
        if self.mode == "generate":
            return self._generation_rate_ci()
        summary = self.summary()
        if summary is None or summary.median_ci_low <= 0:
            return None
        process_medians = [r.median_step_s for r in self.repeats if r.ok and r.median_step_s]
        if len(process_medians) >= 2:
            # Repeats: the spread between processes, not the pooled samples', is what a re-run
            # would see (see compare/verdict.py).
            low, high = geometric_ci(process_medians)
            return self.batch_size / high, self.batch_size / low
        return self.batch_size / summary.median_ci_high, self.batch_size / summary.median_ci_low

    def _generation_rate_ci(self) -> tuple[float, float] | None:
        """B / TPOT's interval: across processes (their TPOTs) with --repeat, else the median
        TPOT's order-statistic interval across rounds; a --protocol case's is its own rate's,
        across the processes' own protocol figures with --repeat (results/generation.protocol_rate_ci)."""
        if self.protocol:
            return protocol_rate_ci(self.generation, [r.protocol_rate for r in self.repeats
                                                      if r.ok and r.protocol_rate])
        tpots = [r.tpot_s for r in self.repeats if r.ok and r.tpot_s is not None]
        if len(tpots) >= 2:
            low, high = geometric_ci(tpots)
        else:
            interval = self.generation.tpot_ci_s if self.generation else None
            if interval is None or min(interval) <= 0:
                return None
            low, high = interval
        return self.batch_size / high, self.batch_size / low

    def epoch_time(self) -> tuple[float, float, float, str] | None:
        """(seconds, low, high, "measured" | "projected").

        Measured when whole epochs ran; otherwise projected as dataset_size / batch x mean step
        time (the mean, not the median, because an epoch's total includes its slow steps), with
        the mean's confidence interval, plus the timed per-epoch work after the steps if any.
        """
        if self.epoch_times:
            s = self._cache("epoch_times").get(self.epoch_times, "summary", summarize)
            return s.mean, s.min, s.max, "measured"
        summary = self.summary()
        if summary is None or not self.dataset_size:
            return None
        scale = self.dataset_size / self.batch_size
        end = self.epoch_end_s or 0.0
        mean, low, high = summary.mean, summary.mean_ci_low, summary.mean_ci_high
        process_means = [r.mean_step_s for r in self.repeats if r.ok and r.mean_step_s]
        if len(process_means) >= 2:
            # Repeats: the interval comes from the spread of the per-process means, so the
            # run-to-run variation a user sees when running again is inside it.
            mean, (low, high) = sum(process_means) / len(process_means), mean_ci(process_means)
        return mean * scale + end, low * scale + end, high * scale + end, "projected"

    def precision_reached(self) -> float | None:
        """The median step time's 95% CI half-width as a fraction of the median (the larger side)."""
        if not self.step_times:
            return None
        return self._cache("step_times").get(self.step_times, "precision",
                                             relative_median_ci_half_width)

    def drift(self) -> dict[str, Any] | None:
        """Whether the last quarter of the samples is significantly slower (results/stats.drift)."""
        return self._cache("step_times").get(self.step_times, "drift", drift)

    def first_use(self) -> FirstUse:
        """The costs before the steady state: time to the first step, warm-up, and the compile
        time (compiled) or the first-use cost (not compiled), from the recorded timing."""
        return FirstUse.of(self, compiled=bool(self.compile_backend), generation=self.generation,
                           start=self.start)

    def input_fraction(self) -> float | None:
        return self.input_wait_s / self.measured_time_s if self.measured_time_s > 0 else None

    def input_wait_is_upper_bound(self) -> bool:
        """Whether ``input_wait_s`` only bounds the device's idle time from above: the host's
        fetch time on an asynchronous device (MPS, or where a timing event failed; every such
        label of measure/loop/input_wait.py says "upper bound"), while the device may have been busy."""
        return "upper bound" in self.input_wait_method

    def input_bound(self) -> bool:
        """Waiting for input took more than INPUT_BOUND_FRACTION of the measured time. Never
        from an upper bound: a device busy with queued work while the host fetched did not wait."""
        fraction = self.input_fraction()
        return (fraction is not None and fraction > INPUT_BOUND_FRACTION
                and not self.input_wait_is_upper_bound())

    def to_dict(self) -> dict[str, Any]:
        data = dump(self)
        for name in SECTIONS:  # each section writes itself (Start adds what its fields say)
            section = getattr(self, name)
            data[name] = section.to_dict() if section is not None else None
        summary = self.summary()
        epoch = self.epoch_time()
        data["derived"] = {
            "stats": summary.to_dict() if summary else None,
            "throughput_samples_per_s": self.throughput(),
            "throughput_ci": self.throughput_ci(),
            "throughput_tokens_per_s": self.tokens_per_s(),
            "epoch_time_s": epoch[0] if epoch else None,
            "epoch_time_ci": [epoch[1], epoch[2]] if epoch else None,
            "epoch_time_kind": epoch[3] if epoch else None,
            "input_fraction": self.input_fraction(),
            "input_bound": self.input_bound(),
            "median_ci_rel_half_width": self.precision_reached(),
            "drift": self.drift(),
            "first_use": self.first_use().to_dict() if self.step_times else None,
        }
        # Every catalogue figure by name, as every surface reads it.
        data["derived"]["figures"] = case_figures(self)
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "", unknown: list[str] | None = None) -> CaseResult:
        """A current-schema case dict (``derived`` is recomputed, not read); the paths of keys
        that are no field go to ``unknown``."""
        case = build(cls, data, where, unknown)
        _check_values(case, where)
        return case


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _check_values(case: CaseResult, where: str) -> None:
    """What the annotations cannot say."""
    for name in ("step_times", "epoch_times"):
        if any(v < 0 for v in getattr(case, name)):
            raise UsageError(f"result field {field_path(where, name)!r} must hold non-negative numbers")
    if case.status not in STATUSES:
        raise UsageError(f"result status {case.status!r} is unknown; allowed: {', '.join(STATUSES)}")
    if case.batch_size <= 0:
        raise UsageError(f"result batch_size must be positive, got {case.batch_size}")
    if case.steps_per_sample <= 0:
        raise UsageError(f"result steps_per_sample must be positive, got {case.steps_per_sample}")


@dataclass
class RunRecord:
    """One invocation: when, where, with which options, and every case (or, for a probe run,
    every device's probe)."""

    run_id: str
    created_at: str
    accelbench_version: str
    command: list[str] = field(default_factory=list)
    #: The kind's options (options/recorded.py: the run options, and a check's reference, a
    #: sweep's plan ...), written as the flat object files have always held.
    options: Recorded = field(default_factory=Recorded)
    environment: dict[str, Any] = field(default_factory=dict)
    cases: list[CaseResult] = field(default_factory=list)
    #: "run", "check", "probe", "scale" or "sweep".
    kind: str = "run"
    #: A probe run's findings, one entry per device; empty for every other kind.
    probes: list[DeviceProbe] = field(default_factory=list)
    #: Figures across cases (catalogue ACROSS_CASES: MLPerf Client's overall geometric means),
    #: computed once when the cases are in (results/protocol_summary.py); written only where a
    #: run has some; None where not computed (a file written before: read by stored_overall).
    protocol_overall: list[Overall] | None = None
    #: Read from a file: the paths of the keys no field of this accelbench holds (a newer file's,
    #: or one written by hand), skipped; not written.
    unknown_keys: list[str] = field(default_factory=list, compare=False, repr=False,
                                    metadata={"stored": False})

    #: Read, not a field: the format's version (the record is upgraded to this one's).
    JSON_EXTRA: ClassVar[tuple[str, ...]] = ("schema_version",)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": self.kind,
            "run_id": self.run_id,
            "created_at": self.created_at,
            "accelbench_version": self.accelbench_version,
            "command": self.command,
            "options": self.options.to_dict(),
            "environment": self.environment,
            "cases": [case.to_dict() for case in self.cases],
            "probes": [probe.to_dict() for probe in self.probes],
            **({"protocol_overall": [group.to_dict() for group in self.protocol_overall]}
               if self.protocol_overall else {}),
        }

    @classmethod
    def from_dict(cls, data: Any) -> RunRecord:
        """A record of any version this accelbench reads, upgraded to the current one."""
        if not isinstance(data, dict):
            raise UsageError(f"result file must be a JSON object, got {type(data).__name__}")
        data = upgrade(data)
        cases = data.get("cases", [])
        if not isinstance(cases, list):
            raise UsageError("result field 'cases' must be a list")
        unknown: list[str] = []
        stored = {key: value for key, value in data.items() if key != "options"}
        record = build(cls, {**stored, "cases": []}, skipped=unknown)
        record.options = from_stored(record.kind, data.get("options", {}), unknown)
        record.cases = [CaseResult.from_dict(case, f"cases[{i}]", unknown) for i, case in enumerate(cases)]
        record.unknown_keys = unknown
        return record
