"""Result records: what a run measured, as plain dataclasses with a versioned dict form.

SCHEMA_VERSION history (each older version gets an upgrade step in ``_UPGRADES``):
  1: first version (accelbench 0.1).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from accelbench.errors import UsageError
from accelbench.measure.stats import (
    Summary,
    drift,
    geometric_ci,
    mean_ci,
    relative_median_ci_half_width,
    summarize,
)

SCHEMA_VERSION = 1
#: A case is input-bound when waiting for batches takes more than this share of its step time:
#: the loader, not the device, then limits throughput.
INPUT_BOUND_FRACTION = 0.2
STATUSES = ("ok", "failed", "oom", "nan", "unsupported", "unavailable", "crashed", "timeout",
            "interrupted")


@dataclass
class CaseResult:
    """One workload x device x mode x precision, with raw samples and derived figures."""

    workload: str
    mode: str
    device: str
    batch_size: int
    workload_version: int = 1
    device_name: str = ""
    precision: str = "fp32"
    compile_backend: str = ""
    channels_last: bool = False
    data: str = "synthetic"
    size: str = "published"
    status: str = "ok"
    error: str = ""
    threads: int = 0
    stop_rule: str = ""
    dataset_size: int = 0
    steps_per_epoch: int = 0
    #: Seconds per step, one value per sample; a sample averages ``steps_per_sample`` steps.
    step_times: list[float] = field(default_factory=list)
    steps_per_sample: int = 1
    warmup_steps: int = 0
    time_to_first_step_s: float | None = None
    warmup_time_s: float | None = None
    input_wait_s: float = 0.0
    measured_time_s: float = 0.0
    measured_steps: int = 0
    epoch_times: list[float] = field(default_factory=list)
    epoch_end_s: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    #: How input_wait_s was measured (device idle from timing events, or host fetch time) and
    #: the host's own fetch time beside it (see accelbench.measure.input_wait).
    input_wait_method: str = ""
    input_fetch_s: float = 0.0
    #: The precision target (percent half-width of the median's CI) of a time budget, if any,
    #: and why measuring stopped ("steps", "epochs", "time budget", "precision reached").
    target_ci_pct: float | None = None
    stop_reason: str = ""
    peak_memory_bytes: int | None = None
    memory_source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: With --repeat N: one dict per worker process (its samples and figures, see repeat.py);
    #: the fields above are then the pooled view. Empty for a single process.
    repeats: list[dict[str, Any]] = field(default_factory=list)

    # --- derived figures (computed on demand from the raw samples) ------------------------------
    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def summary(self) -> Summary | None:
        return summarize(self.step_times) if self.step_times else None

    def throughput(self) -> float | None:
        """Samples per second at the median step time (the typical steady-state rate)."""
        summary = self.summary()
        return self.batch_size / summary.median if summary else None

    def throughput_ci(self) -> tuple[float, float] | None:
        summary = self.summary()
        if summary is None or summary.median_ci_low <= 0:
            return None
        process_medians = [r["median_step_s"] for r in self.repeats
                           if r.get("status", "ok") == "ok" and r.get("median_step_s")]
        if len(process_medians) >= 2:
            # Repeats: the spread between processes, not the pooled samples', is what a re-run
            # would see (see compare/verdict.py).
            low, high = geometric_ci(process_medians)
            return self.batch_size / high, self.batch_size / low
        return self.batch_size / summary.median_ci_high, self.batch_size / summary.median_ci_low

    def epoch_time(self) -> tuple[float, float, float, str] | None:
        """(seconds, low, high, "measured" | "projected").

        Measured when whole epochs ran; otherwise projected as dataset_size / batch x mean step
        time (the mean, not the median, because an epoch's total includes its slow steps), with
        the mean's confidence interval, plus the timed per-epoch work after the steps if any.
        """
        if self.epoch_times:
            s = summarize(self.epoch_times)
            return s.mean, s.min, s.max, "measured"
        summary = self.summary()
        if summary is None or not self.dataset_size:
            return None
        scale = self.dataset_size / self.batch_size
        end = self.epoch_end_s or 0.0
        mean, low, high = summary.mean, summary.mean_ci_low, summary.mean_ci_high
        process_means = [r["mean_step_s"] for r in self.repeats
                         if r.get("status", "ok") == "ok" and r.get("mean_step_s")]
        if len(process_means) >= 2:
            # Repeats: the interval comes from the spread of the per-process means, so the
            # run-to-run variation a user sees when running again is inside it.
            mean, (low, high) = sum(process_means) / len(process_means), mean_ci(process_means)
        return mean * scale + end, low * scale + end, high * scale + end, "projected"

    def precision_reached(self) -> float | None:
        """The median step time's 95% CI half-width as a fraction of the median (the larger side)."""
        return relative_median_ci_half_width(self.step_times) if self.step_times else None

    def input_fraction(self) -> float | None:
        return self.input_wait_s / self.measured_time_s if self.measured_time_s > 0 else None

    def input_bound(self) -> bool:
        fraction = self.input_fraction()
        return fraction is not None and fraction > INPUT_BOUND_FRACTION

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        summary = self.summary()
        epoch = self.epoch_time()
        data["derived"] = {
            "stats": summary.to_dict() if summary else None,
            "throughput_samples_per_s": self.throughput(),
            "throughput_ci": self.throughput_ci(),
            "epoch_time_s": epoch[0] if epoch else None,
            "epoch_time_ci": [epoch[1], epoch[2]] if epoch else None,
            "epoch_time_kind": epoch[3] if epoch else None,
            "input_fraction": self.input_fraction(),
            "input_bound": self.input_bound(),
            "median_ci_rel_half_width": self.precision_reached(),
            "drift": drift(self.step_times),
        }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        _require_mapping(data, "case")
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        for required in ("workload", "mode", "device", "batch_size"):
            if required not in known:
                raise UsageError(f"result case is missing the field {required!r}")
        case = cls(**known)
        _check_types(case)
        return case


_NUMBER = (int, float)
_OPTIONAL_NUMBER = (int, float, type(None))
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "workload": (str,), "mode": (str,), "device": (str,), "device_name": (str,),
    "precision": (str,), "compile_backend": (str,), "channels_last": (bool,), "data": (str,),
    "size": (str,), "status": (str,), "error": (str,),
    "stop_rule": (str,), "memory_source": (str,),
    "batch_size": (int,), "workload_version": (int,), "steps_per_sample": (int,), "threads": (int,),
    "dataset_size": (int,), "steps_per_epoch": (int,), "warmup_steps": (int,),
    "measured_steps": (int,), "peak_memory_bytes": (int, type(None)),
    "input_wait_method": (str,), "input_fetch_s": _NUMBER, "target_ci_pct": _OPTIONAL_NUMBER,
    "stop_reason": (str,),
    "time_to_first_step_s": _OPTIONAL_NUMBER, "warmup_time_s": _OPTIONAL_NUMBER,
    "epoch_end_s": _OPTIONAL_NUMBER, "input_wait_s": _NUMBER, "measured_time_s": _NUMBER,
    "step_times": (list,), "epoch_times": (list,), "extra": (dict,), "metrics": (dict,),
    "repeats": (list,),
}


def _check_types(case: CaseResult) -> None:
    missing = set(CaseResult.__dataclass_fields__) - set(_FIELD_TYPES)
    assert not missing, f"result fields without a declared type: {missing}"
    for name, types in _FIELD_TYPES.items():
        value = getattr(case, name)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise UsageError(
                f"result field {name!r} has the wrong type: {type(value).__name__} "
                f"(expected {' or '.join(t.__name__ for t in types)})"
            )
    for name in ("step_times", "epoch_times"):
        values = getattr(case, name)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
                   for v in values):
            raise UsageError(f"result field {name!r} must hold non-negative numbers")
    if case.status not in STATUSES:
        raise UsageError(f"result status {case.status!r} is unknown; allowed: {', '.join(STATUSES)}")
    if case.batch_size <= 0:
        raise UsageError(f"result batch_size must be positive, got {case.batch_size}")
    if case.steps_per_sample <= 0:
        raise UsageError(f"result steps_per_sample must be positive, got {case.steps_per_sample}")
    if not all(isinstance(v, int | float) and not isinstance(v, bool)
               for v in case.metrics.values()):
        raise UsageError("result field 'metrics' must map names to numbers")


def _require_mapping(data: Any, what: str) -> None:
    if not isinstance(data, dict):
        raise UsageError(f"result {what} must be a JSON object, got {type(data).__name__}")


@dataclass
class RunRecord:
    """One invocation: when, where, with which options, and every case."""

    run_id: str
    created_at: str
    accelbench_version: str
    command: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    cases: list[CaseResult] = field(default_factory=list)
    kind: str = "run"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": self.kind,
            "run_id": self.run_id,
            "created_at": self.created_at,
            "accelbench_version": self.accelbench_version,
            "command": self.command,
            "options": self.options,
            "environment": self.environment,
            "cases": [case.to_dict() for case in self.cases],
        }

    @classmethod
    def from_dict(cls, data: Any) -> RunRecord:
        _require_mapping(data, "file")
        version = data.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise UsageError("result file has no integer 'schema_version'; is it an accelbench "
                             "result?")
        if version > SCHEMA_VERSION:
            raise UsageError(
                f"result file has schema version {version}, newer than this accelbench reads "
                f"(<= {SCHEMA_VERSION}); upgrade accelbench"
            )
        if version < 1:
            raise UsageError(f"result file has invalid schema version {version}")
        for step in range(version, SCHEMA_VERSION):
            data = _UPGRADES[step](data)
        cases = data.get("cases", [])
        if not isinstance(cases, list):
            raise UsageError("result field 'cases' must be a list")
        for name in ("run_id", "created_at", "accelbench_version"):
            if not isinstance(data.get(name), str):
                raise UsageError(f"result field {name!r} is missing or not a string")
        for name in ("environment", "options"):
            if not isinstance(data.get(name, {}), dict):
                raise UsageError(f"result field {name!r} must be an object")
        return cls(
            run_id=data["run_id"],
            created_at=data["created_at"],
            accelbench_version=data["accelbench_version"],
            command=list(data.get("command", [])),
            options=dict(data.get("options", {})),
            environment=dict(data.get("environment", {})),
            cases=[CaseResult.from_dict(case) for case in cases],
            kind=str(data.get("kind", "run")),
        )


#: _UPGRADES[v] turns a version-v dict into a version-(v+1) dict.
_UPGRADES: dict[int, Any] = {}
