"""Pure analysis of a batch-size sweep record (no torch): the batch-size list syntax, each
device's throughput curve with its saturation point, and the CPU crossover.

Definitions (also in the README):
- **saturation batch**: the smallest batch size whose median throughput is within 5%
  (``SATURATION_FRACTION`` = 0.95) of the best throughput that device reached in the sweep. When
  only the largest batch that ran gets there, the curve is still rising: *not saturated by N*.
- **crossover**: the smallest batch size from which the accelerator is faster than the CPU at that
  batch and every larger batch where both ran; *faster* means its throughput interval lies wholly
  above the CPU's (the medians decide where a case has no interval).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from accelbench.errors import UsageError
from accelbench.results import CaseResult, RunRecord, rate_unit

SATURATION_FRACTION = 0.95
MAX_POINTS = 64
ELLIPSIS = "..."


def parse_batch_sizes(text: str | Sequence[int], flag: str = "--batch-size") -> tuple[int, ...]:
    """``"1,4,16"``, or ``"1,2,4,...,256"`` (continuing the last two values' ratio, or their step
    when the ratio is not a whole number), as sorted distinct positive values (batch sizes, or
    the prompt lengths of ``sweep --prompt-len``: ``flag`` names the option in errors)."""
    items: list[str | int] = ([i.strip() for i in text.split(",") if i.strip()] if isinstance(text, str)
                              else list(text))
    values: list[int] = []
    for index, item in enumerate(items):
        if item == ELLIPSIS:
            if len(values) < 2 or index != len(items) - 2:
                raise UsageError(f"{flag}: '...' needs two values before it and one after, "
                                 "e.g. 1,2,4,...,256")
            continue
        try:
            value = int(item)
        except (TypeError, ValueError):
            raise UsageError(f"{flag}: {item!r} is not a whole number; give a comma list "
                             "like 1,4,16 or 1,2,4,...,256") from None
        if value <= 0 or value > 10**7:
            raise UsageError(f"{flag}: {value} is out of range (1 to 10000000)")
        values.append(value)
    if ELLIPSIS in items:
        values = _continue(values[:-1], values[-1])
    if not values or len(set(values)) > MAX_POINTS:
        raise UsageError(f"{flag} needs 1 to {MAX_POINTS} values")
    return tuple(sorted(set(values)))


def _continue(start: list[int], last: int) -> list[int]:
    a, b = start[-2], start[-1]
    if b <= a or last < b:
        raise UsageError(f"--batch-size: '{a},{b},...,{last}' must increase")
    values = list(start)
    geometric = b % a == 0 and b // a > 1
    while True:
        following = values[-1] * (b // a) if geometric else values[-1] + (b - a)
        if following > last or len(values) > MAX_POINTS:
            break
        values.append(following)
    return [*values, last]


def group_key(case: CaseResult) -> tuple[str, ...]:
    """Cases of one curve share this key; only the batch size differs along it."""
    return (case.workload, case.mode, case.device, case.precision, case.compile_backend,
            str(case.channels_last))


@dataclass(frozen=True)
class Curve:
    """One device's throughput against batch size, for one workload, mode and configuration."""

    workload: str
    mode: str
    device: str
    config: str
    cases: tuple[CaseResult, ...]
    best: CaseResult | None
    saturation: CaseResult | None
    #: True when the saturation batch is below the largest batch that ran (the curve flattened).
    saturated: bool
    oom_batch: int | None

    def describe(self) -> str:
        head = f"{self.workload} {self.mode} on {self.device}{self.config}"
        if self.best is None:
            return f"{head}: no batch size ran"
        best = (f"best {self.best.throughput():,.4g} {rate_unit(self.mode)} "
                f"at batch {self.best.batch_size}")
        if self.saturated and self.saturation is not None:
            text = (f"{head}: saturates at batch {self.saturation.batch_size} "
                    f"(within {1 - SATURATION_FRACTION:.0%} of its best); {best}")
        else:
            text = f"{head}: not saturated by batch {self.best.batch_size} (still rising); {best}"
        if self.oom_batch is not None:
            text += f"; out of memory from batch {self.oom_batch}"
        return text


def _faster(accel: CaseResult, cpu: CaseResult) -> bool:
    a_ci, c_ci = accel.throughput_ci(), cpu.throughput_ci()
    if a_ci and c_ci:
        return a_ci[0] > c_ci[1]
    return (accel.throughput() or 0) > (cpu.throughput() or 0)


def curves(record: RunRecord) -> list[Curve]:
    groups: dict[tuple[str, ...], list[CaseResult]] = {}
    for case in record.cases:
        groups.setdefault(group_key(case), []).append(case)
    out = []
    for key, cases in groups.items():
        cases.sort(key=lambda c: c.batch_size)
        ran = [c for c in cases if c.ok and c.throughput()]
        best = max(ran, key=lambda c: c.throughput() or 0.0, default=None)
        saturation = None
        if best is not None:
            floor = SATURATION_FRACTION * (best.throughput() or 0.0)
            saturation = next(c for c in ran if (c.throughput() or 0.0) >= floor)
        oom = next((c.batch_size for c in cases if c.status == "oom"), None)
        config = "" if key[3:] == ("fp32", "", "False") else f" ({config_words(cases[0])})"
        out.append(Curve(key[0], key[1], key[2], config, tuple(cases), best, saturation,
                         saturated=saturation is not None and saturation.batch_size < ran[-1].batch_size,
                         oom_batch=oom))
    return out


def config_words(case: CaseResult) -> str:
    """Precision, compile back end and memory format in words: "bf16 compile:inductor"."""
    parts = [case.precision] + ([f"compile:{case.compile_backend}"] if case.compile_backend else [])
    return " ".join(parts + (["channels-last"] if case.channels_last else []))


def crossovers(all_curves: Sequence[Curve]) -> list[str]:
    """One sentence per accelerator curve that has a CPU curve of the same workload, mode and config."""
    lines = []
    cpus = {(c.workload, c.mode, c.config): c for c in all_curves if c.device == "cpu"}
    for curve in all_curves:
        cpu = cpus.get((curve.workload, curve.mode, curve.config))
        if curve.device == "cpu" or cpu is None:
            continue
        theirs = {c.batch_size: c for c in cpu.cases if c.ok and c.throughput()}
        pairs = [(c.batch_size, _faster(c, theirs[c.batch_size])) for c in curve.cases
                 if c.ok and c.throughput() and c.batch_size in theirs]
        head = f"{curve.workload} {curve.mode}{curve.config}: {curve.device} vs cpu"
        if not pairs:
            lines.append(f"{head}: no batch size ran on both")
            continue
        crossover = None
        for batch, faster in reversed(pairs):
            if not faster:
                break
            crossover = batch
        if crossover is None:
            lines.append(f"{head}: the CPU is as fast or faster at every batch size where both ran "
                         f"(up to {pairs[-1][0]})")
        elif crossover == pairs[0][0]:
            lines.append(f"{head}: {curve.device} is faster at every batch size tried (from {crossover})")
        else:
            lines.append(f"{head}: crossover at batch {crossover}; {curve.device} is faster from there on")
    return lines
