"""The options, in one package that imports no torch: the run options and the Cases they expand
into, validated when built (here); flags and keywords turned into them (values.py); check's
options (check.py). Option parsing and validation import no torch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.devices.precisions import precision_spec
from accelbench.errors import UsageError
from accelbench.options.codec import Codec
from accelbench.workloads.presets import DEFAULT_NEW_TOKENS, DEFAULT_PROMPT_LEN, RUN_MODES, SIZES

STOP_KINDS = ("steps", "time", "epochs", "sustained")
DEFAULT_TIME_BUDGET_S = 10.0
DEFAULT_WARMUP_STEPS = 3
#: Under a time budget, at least this many samples are taken whatever the budget.
MIN_SAMPLES = 5
#: On asynchronous devices, steps shorter than this are timed in windows of several steps.
MIN_WINDOW_S = 0.005
#: Under a time budget, measuring stops early once the median's 95% CI is within +-this percent
#: of the median (``--target-ci``; 0 measures the whole budget).
DEFAULT_TARGET_CI_PCT = 2.0
#: --data: host batches copied to the device every step (as a DataLoader gives them), batches
#: resident on the device (pure compute, as timm and TorchBench measure), or a real data set.
DATA_MODES = ("synthetic", "synthetic-device", "real")
ISOLATIONS = ("process", "none")
DEFAULT_CASE_TIMEOUT_S = 1800.0
#: --sustained: throughput and sensors are recorded per interval of this many seconds ...
DEFAULT_SUSTAINED_INTERVAL_S = 10.0
#: ... and a run holds at least this many, so the burst (a fifth) has a spread to judge.
MIN_SUSTAINED_INTERVALS = 10
#: Beyond these a value is a typo, not a measurement plan (and would overflow timers and ranges).
MOST_COUNT = 10**9
MOST_SECONDS = 1e7


def check_number(flag: str, value: object, *, whole: bool, zero_ok: bool,
                 most: float = MOST_COUNT) -> None:
    """Raise UsageError unless ``value`` is a finite number (an int when ``whole``) above zero (or
    at least zero) and at most ``most``. The one check behind the CLI flags and the Python
    keywords, so both report a bad value with the same words."""
    shown = _shown(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{flag} must be a {'whole ' if whole else ''}number, got {shown}")
    if whole and not isinstance(value, int):
        raise UsageError(f"{flag} must be a whole number, got {value!r}")
    if not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, got {shown}")
    if value < 0 or (value == 0 and not zero_ok):
        raise UsageError(f"{flag} must be {'0 or more' if zero_ok else 'positive'}, got {shown}")
    if value > most:
        raise UsageError(f"{flag} must be at most {most:.0f}, got {shown}")


def _shown(value: object) -> str:
    # 3 and 3.0 read the same: the CLI parses a float where Python code may pass an int.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, str) else str(value)


def _check_flag(flag: str, value: object) -> None:
    if not isinstance(value, bool):
        raise UsageError(f"{flag} is a switch: True or False, got {value!r}")


def _check_choice(flag: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise UsageError(f"{flag} {value!r} is unknown; allowed: {', '.join(allowed)}")


def check_durations(duration_s: float, interval_s: float,
                    min_intervals: int = MIN_SUSTAINED_INTERVALS) -> str:
    """The problem with a sustained duration and interval, in one line; "" when there is none.
    Fewer than ``min_intervals`` intervals leave the burst (a fifth) without a spread to judge."""
    if not (math.isfinite(duration_s) and duration_s > 0):
        return f"the sustained duration must be a positive number of minutes, not {duration_s / 60:g}"
    if not (math.isfinite(interval_s) and interval_s > 0):
        return f"the sustained interval must be a positive number of seconds, not {interval_s:g}"
    if duration_s < min_intervals * interval_s:
        return (f"a sustained run of {duration_s:g} s holds fewer than {min_intervals} intervals of "
                f"{interval_s:g} s; allowed: a duration of at least {min_intervals * interval_s:g} s "
                "or a shorter --sustained-interval")
    return ""


@dataclass(frozen=True)
class StopRule(Codec):
    """When measuring stops: after ``value`` steps or epochs, a time budget of ``value`` seconds,
    or (kind "sustained", ``--sustained MINUTES``) a sustained run of ``value`` seconds recorded
    in intervals of ``interval`` seconds."""

    kind: str = "time"
    value: float = DEFAULT_TIME_BUDGET_S
    #: Percent half-width of the median's CI at which a time budget stops early; None = the
    #: default (DEFAULT_TARGET_CI_PCT under a time budget; no target for the other kinds).
    target_ci: float | None = None
    #: A sustained run's interval in seconds (the other kinds ignore it).
    interval: float = DEFAULT_SUSTAINED_INTERVAL_S

    def __post_init__(self) -> None:
        if self.kind not in STOP_KINDS:
            raise UsageError(f"stop rule {self.kind!r} is unknown; allowed: {STOP_KINDS}")
        flag = {"time": "--time-budget"}.get(self.kind, f"--{self.kind}")
        if self.kind == "sustained":
            # Given in minutes, kept in seconds.
            numeric = isinstance(self.value, int | float) and not isinstance(self.value, bool)
            check_number(flag, self.value / 60 if numeric else self.value,
                         whole=False, zero_ok=False, most=MOST_SECONDS / 60)
            check_number("--sustained-interval", self.interval, whole=False, zero_ok=False,
                         most=MOST_SECONDS)
        else:
            check_number(flag, self.value, whole=False, zero_ok=False,
                         most=MOST_SECONDS if self.kind == "time" else MOST_COUNT)
        # A stored record may say 5.0 steps: a whole float is a whole number here.
        if self.kind in ("steps", "epochs") and int(self.value) != self.value:
            raise UsageError(f"{flag} must be a whole number, got {self.value}")
        if self.target_ci is not None:
            check_number("--target-ci", self.target_ci, whole=False, zero_ok=True)
            if not 0 <= self.target_ci < 100:
                raise UsageError(f"--target-ci must be a percentage from 0 to below 100, got "
                                 f"{_shown(self.target_ci)}")
            if self.target_ci and self.kind != "time":
                raise UsageError(f"--target-ci stops a time budget early; it cannot be combined "
                                 f"with --{self.kind}")
        problem = check_durations(self.value, self.interval) if self.kind == "sustained" else ""
        if problem:
            raise UsageError(problem)

    @property
    def target_ci_pct(self) -> float:
        """The effective precision target in percent (0 = none)."""
        if self.target_ci is not None:
            return self.target_ci
        return DEFAULT_TARGET_CI_PCT if self.kind == "time" else 0.0

    def describe(self) -> str:
        if self.kind == "time":
            target = f", or until the median's CI is within +-{self.target_ci_pct:g}%" \
                if self.target_ci_pct else ""
            return f"time budget {self.value:g} s{target}"
        if self.kind == "sustained":
            return f"sustained {self.value / 60:g} min in {self.interval:g} s intervals"
        return f"{int(self.value)} {self.kind}"

    @property
    def sustained_s(self) -> float:
        """Seconds of a sustained run (0 for the other kinds)."""
        return float(self.value) if self.kind == "sustained" else 0.0


@dataclass(frozen=True)
class RunOptions(Codec):
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
    case_timeout: float = DEFAULT_CASE_TIMEOUT_S
    auto_batch: bool = False
    cooldown: float = 0.0
    #: Worker processes per case (interleaved rounds); the per-process figure is what compare judges.
    repeat: int = 1
    #: Profile a few extra steps after the measured ones (torch.profiler) for the diagnosis.
    profile: bool = False
    #: torch.backends.cudnn.benchmark: cuDNN tries its algorithms for each new input shape (in the
    #: warm-up) and keeps the fastest, as the published CNN figures were measured. Changes the
    #: speed, not the work: not part of the comparability key.
    cudnn_benchmark: bool = True
    #: The suite the workloads came from (None: named): a suite may run a workload at a smaller
    #: batch than its published one (``workloads/suites.py``).
    suite: str | None = None
    #: Generation cases: prompt lengths and new-token counts, each pair a case; empty, the
    #: default that fits the model's context (generation_lengths says which).
    prompt_lens: tuple[int, ...] = ()
    new_tokens: tuple[int, ...] = ()

    #: Generation cases: each token is read to the host as it is made (``--stream``), as a
    #: streaming server does; not the same work as tokens left on the device until the round
    #: ends (the figures' ``streamed``).
    stream: bool = False

    def __post_init__(self) -> None:
        bad = [m for m in self.modes if m not in RUN_MODES]
        if bad or not self.modes:
            raise UsageError(f"--mode {','.join(self.modes)!r} is not allowed; allowed: train, "
                             "eval, generate, or a comma list of them")
        for flag, lengths in (("--prompt-len", self.prompt_lens), ("--new-tokens", self.new_tokens)):
            for value in lengths:
                check_number(flag, value, whole=True, zero_ok=False)
        _check_flag("--stream", self.stream)
        if self.stream and "generate" not in self.modes and self.suite is None:
            raise UsageError("--stream reads each generated token to the host: it goes with --mode "
                             "generate")
        if self.stop.kind == "sustained" and "generate" in self.modes:
            raise UsageError("--sustained times train and eval steps; generate cases are timed in "
                             "rounds: leave out --mode generate or --sustained")
        for flag, value in (("--batch-size", self.batch_size), ("--threads", self.threads)):
            if value is not None:
                check_number(flag, value, whole=True, zero_ok=False)
        check_number("--warmup", self.warmup_steps, whole=True, zero_ok=True)
        check_number("--workers", self.workers, whole=True, zero_ok=True)
        check_number("--repeat", self.repeat, whole=True, zero_ok=False)
        check_number("--case-timeout", self.case_timeout, whole=False, zero_ok=False,
                     most=MOST_SECONDS)
        check_number("--cooldown", self.cooldown, whole=False, zero_ok=True, most=MOST_SECONDS)
        for flag, switch in (("--channels-last", self.channels_last),
                             ("--auto-batch", self.auto_batch), ("--profile", self.profile),
                             ("cudnn_benchmark", self.cudnn_benchmark)):
            _check_flag(flag, switch)
        for name in self.precisions:
            precision_spec(name)
        if not self.precisions or not self.compile_backends:
            raise UsageError("--precision and --compile need at least one value")
        _check_choice("--isolation", self.isolation, ISOLATIONS)
        _check_choice("--size", self.size, SIZES)
        if self.repeat > 1 and self.isolation != "process":
            raise UsageError("--repeat N needs --isolation process: each repeat is a fresh worker process")
        _check_choice("--data", self.data, DATA_MODES)
        if self.data == "real":
            if self.data_dir is None:
                raise UsageError("--data real needs --data-dir DIR holding the data set files")
            if not self.data_dir.is_dir():
                raise UsageError(f"--data-dir {self.data_dir} is not a folder")

    @property
    def case_timeout_s(self) -> float:
        """Seconds a case may take: ``--case-timeout``, grown by a sustained run's duration."""
        return self.case_timeout + self.stop.sustained_s

    def generation_lengths(self, workload: str, context: int) -> list[tuple[int, int]]:
        """(prompt tokens, new tokens) of each generation case of ``workload``, whose model holds
        ``context`` positions: every new-token count with every prompt length (new tokens
        outer). Left out, the new tokens are DEFAULT_NEW_TOKENS, or half the context where that
        is less; the prompt is DEFAULT_PROMPT_LEN, or the context minus the new tokens where
        that is less: both at least 1 and together within the context, for any context of 2 or
        more. A suite fits given new tokens to half a small model's context too (its one
        generation case runs on every model of the suite); given values otherwise stand as
        given, and a pair that does not fit is a UsageError naming it and what fits."""
        half = context // 2
        if not self.new_tokens:
            news: tuple[int, ...] = (min(DEFAULT_NEW_TOKENS, half),)
        else:
            news = tuple(min(n, half) for n in self.new_tokens) if self.suite else self.new_tokens
        pairs = [(prompt, new) for new in news
                 for prompt in self.prompt_lens or (min(DEFAULT_PROMPT_LEN, context - new),)]
        for prompt, new in pairs:
            if prompt < 1 or new < 1 or prompt + new > context:
                given = (f"--prompt-len {prompt}" if self.prompt_lens
                         else f"a prompt of {prompt} tokens (the default)")
                given += (f" and --new-tokens {new}" if self.new_tokens
                          else f" and {new} new tokens (the default)")
                raise UsageError(f"{given} do not fit {workload!r}'s context of {context} tokens; "
                                 f"allowed: prompt and new tokens each at least 1, together at "
                                 f"most {context}")
        return pairs
