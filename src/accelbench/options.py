"""Run options and the Cases they expand into, validated when built."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError
from accelbench.workloads.base import MODES

STOP_KINDS = ("steps", "time", "epochs")
DEFAULT_TIME_BUDGET_S = 10.0
DEFAULT_WARMUP_STEPS = 3
#: Under a time budget, at least this many samples are taken whatever the budget.
MIN_SAMPLES = 5
#: On asynchronous devices, steps shorter than this are timed in windows of several steps.
MIN_WINDOW_S = 0.005


@dataclass(frozen=True)
class StopRule:
    kind: str = "time"
    value: float = DEFAULT_TIME_BUDGET_S

    def __post_init__(self) -> None:
        if self.kind not in STOP_KINDS:
            raise UsageError(f"stop rule {self.kind!r} is unknown; allowed: {STOP_KINDS}")
        if not self.value > 0:
            raise UsageError(f"--{'time-budget' if self.kind == 'time' else self.kind} must be "
                             f"positive, got {self.value}")
        if self.kind != "time" and int(self.value) != self.value:
            raise UsageError(f"--{self.kind} must be a whole number, got {self.value}")

    def describe(self) -> str:
        if self.kind == "time":
            return f"time budget {self.value:g} s"
        return f"{int(self.value)} {self.kind}"


@dataclass(frozen=True)
class RunOptions:
    workloads: tuple[str, ...] = ("mnist",)
    device: str = "cpu"
    modes: tuple[str, ...] = ("train",)
    stop: StopRule = field(default_factory=StopRule)
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    batch_size: int | None = None
    threads: int | None = None
    data: str = "synthetic"
    data_dir: Path | None = None
    size: str = "published"
    workers: int = 0
    seed: int = 0
    precisions: tuple[str, ...] = ("fp32",)
    #: Compile back ends to try; "" means eager (no torch.compile).
    compile_backends: tuple[str, ...] = ("",)
    channels_last: bool = False
    #: User workload files, loaded again by each worker process.
    workload_files: tuple[str, ...] = ()
    #: "process" runs each case in its own worker process; "none" runs it inline.
    isolation: str = "process"
    #: Seconds a case may take (set-up, warm-up and measurement) before it is stopped.
    case_timeout: float = 1800.0
    auto_batch: bool = False
    cooldown: float = 0.0

    def __post_init__(self) -> None:
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise UsageError(f"--mode {','.join(self.modes)!r} is not allowed; allowed: train, "
                             "eval, or train,eval")
        for name in ("batch_size", "threads"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")
        if self.warmup_steps < 0:
            raise UsageError(f"--warmup must be 0 or more, got {self.warmup_steps}")
        if self.workers < 0:
            raise UsageError(f"--workers must be 0 or more, got {self.workers}")
        from accelbench.precision import get_precision

        for name in self.precisions:
            get_precision(name)
        if not self.precisions or not self.compile_backends:
            raise UsageError("--precision and --compile need at least one value")
        if self.isolation not in ("process", "none"):
            raise UsageError(f"--isolation {self.isolation!r} is unknown; allowed: process, none")
        if not self.case_timeout > 0:
            raise UsageError(f"--case-timeout must be positive, got {self.case_timeout}")
        if self.cooldown < 0:
            raise UsageError(f"--cooldown must be 0 or more, got {self.cooldown}")
        if self.data not in ("synthetic", "real"):
            raise UsageError(f"--data {self.data!r} is unknown; allowed: synthetic, real")
        if self.data == "real":
            if self.data_dir is None:
                raise UsageError("--data real needs --data-dir DIR holding the data set files")
            if not self.data_dir.is_dir():
                raise UsageError(f"--data-dir {self.data_dir} is not a folder")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptions:
        """The inverse of to_dict (used to hand options to a worker process)."""
        fields = dict(data)
        fields["stop"] = StopRule(fields["stop"]["kind"], fields["stop"]["value"])
        fields["data_dir"] = Path(fields["data_dir"]) if fields.get("data_dir") else None
        for name in ("workloads", "modes", "precisions", "compile_backends", "workload_files"):
            if name in fields:
                fields[name] = tuple(fields[name])
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workloads": list(self.workloads), "device": self.device, "modes": list(self.modes),
            "stop": {"kind": self.stop.kind, "value": self.stop.value},
            "warmup_steps": self.warmup_steps, "batch_size": self.batch_size,
            "threads": self.threads, "data": self.data,
            "data_dir": str(self.data_dir) if self.data_dir else None, "size": self.size,
            "workers": self.workers, "seed": self.seed, "precisions": list(self.precisions),
            "compile_backends": list(self.compile_backends), "channels_last": self.channels_last,
            "workload_files": list(self.workload_files), "isolation": self.isolation,
            "case_timeout": self.case_timeout, "auto_batch": self.auto_batch,
            "cooldown": self.cooldown,
        }
