"""Compare runs: per workload and mode, machine rows in the published style plus pairwise verdicts.

How a difference is called. Step times are skewed, with a long tail of slow steps (garbage
collection, thermal throttling, other processes), so neither a t-test (which assumes normal data)
nor "the medians differ" (which ignores the spread) is trustworthy. Like asv, we call a difference
"faster" or "slower" only when a two-sided Mann-Whitney U test on the raw per-step samples rejects
"same distribution" at alpha = 0.05; otherwise it is "same within noise", whatever the ratio of the
medians says. The test is rank-based, so it holds for any step-time distribution and a few outliers
cannot create or hide a difference. The ratio shown is always the ratio of median throughputs.

What is compared. Two cases are compared only when they did the same work: same workload version,
batch size, precision, data kind, workload size, compile backend and memory layout. Otherwise they
are marked "not comparable" with the reason, rather than giving a ratio that means nothing. A case
that did not finish ("oom", "failed", ...) is shown with its status, never as a number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

from scipy.stats import mannwhitneyu

from accelbench.reference.published import EpochReference, epoch_references
from accelbench.results import CaseResult, RunRecord

ALPHA = 0.05
#: Fewer samples than this per side cannot reach p < 0.05 in a two-sided U test (3 vs 3 gives 0.1).
MIN_SAMPLES = 4

FASTER, SLOWER, SAME, NOT_COMPARABLE, NOT_RUN, TOO_FEW = (
    "faster", "slower", "same within noise", "not comparable", "did not run", "too few samples")
#: The fields that must be equal for two cases to measure the same work.
COMPARABLE_FIELDS = ("workload_version", "batch_size", "precision", "data", "size", "compile_backend",
                     "channels_last")


@dataclass(frozen=True)
class LabelledRun:
    """A run as the user named it: a run id from the history or a result file path."""

    label: str
    record: RunRecord

    @property
    def machine(self) -> str:
        machine = self.record.environment.get("machine", {})
        return str(machine.get("hostname", "")) if isinstance(machine, dict) else ""

    @property
    def memory_bytes(self) -> int | None:
        cpu = self.record.environment.get("devices", {}).get("cpu", {})
        value = cpu.get("memory_total_bytes") if isinstance(cpu, dict) else None
        return value if isinstance(value, int) else None


@dataclass(frozen=True)
class Verdict:
    """B against A: ``ratio`` = B's median throughput / A's; ``verdict`` one of the constants."""

    verdict: str
    ratio: float | None = None
    p_value: float | None = None
    reason: str = ""
    noisy: bool = False


@dataclass(frozen=True)
class MachineRow:
    """One row of a published-style table: a run's CPU case and (at most) one accelerator case."""

    run: LabelledRun
    cpu: CaseResult | None
    accel: CaseResult | None
    speedup: float | None
    speedup_verdict: Verdict | None


@dataclass(frozen=True)
class Pair:
    a_label: str
    b_label: str
    a: CaseResult
    b: CaseResult
    verdict: Verdict


@dataclass
class WorkloadComparison:
    workload: str
    mode: str
    rows: list[MachineRow] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    references: list[EpochReference] = field(default_factory=list)


def device_kind(device: str) -> str:
    return device.split(":", 1)[0]


def incomparable_reasons(a: CaseResult, b: CaseResult) -> list[str]:
    reasons = []
    if a.workload != b.workload or a.mode != b.mode:
        reasons.append(f"workload {a.workload}/{a.mode} vs {b.workload}/{b.mode}")
    for name in COMPARABLE_FIELDS:
        mine, theirs = getattr(a, name, None), getattr(b, name, None)
        if mine != theirs:
            reasons.append(f"{name.replace('_', ' ')} {mine} vs {theirs}")
    return reasons


def compare_cases(a: CaseResult, b: CaseResult, alpha: float = ALPHA) -> Verdict:
    """Is B faster than A? See the module docstring for the rule."""
    reasons = incomparable_reasons(a, b)
    if reasons:
        return Verdict(NOT_COMPARABLE, reason="; ".join(reasons))
    if not (a.ok and b.ok):
        failed = [f"{label} {case.status}" for label, case in (("A", a), ("B", b)) if not case.ok]
        return Verdict(NOT_RUN, reason=", ".join(failed))
    sa, sb = a.summary(), b.summary()
    if sa is None or sb is None:
        return Verdict(NOT_RUN, reason="no timed samples")
    ratio = sa.median / sb.median if sb.median > 0 else None
    noisy = sa.noisy or sb.noisy
    if min(sa.n, sb.n) < MIN_SAMPLES:
        return Verdict(TOO_FEW, ratio, reason=f"{sa.n} and {sb.n} samples; need {MIN_SAMPLES}+ each",
                       noisy=noisy)
    # Per-step samples that average several steps are still comparable in location, which is
    # what the U test asks about; their spread differs, which the test tolerates.
    p_value = float(mannwhitneyu(a.step_times, b.step_times, alternative="two-sided").pvalue)
    if p_value >= alpha:
        return Verdict(SAME, ratio, p_value, noisy=noisy)
    return Verdict(FASTER if sb.median < sa.median else SLOWER, ratio, p_value, noisy=noisy)


def _rows_for(run: LabelledRun, cases: list[CaseResult]) -> list[MachineRow]:
    cpu = next((c for c in cases if device_kind(c.device) == "cpu"), None)
    accels = [c for c in cases if device_kind(c.device) != "cpu"]
    if not accels:
        return [MachineRow(run, cpu, None, None, None)]
    rows = []
    for accel in accels:
        speedup, verdict = None, None
        if cpu is not None:
            verdict = compare_cases(cpu, accel)
            speedup = _speedup(cpu, accel) if verdict.verdict not in (NOT_COMPARABLE, NOT_RUN) else None
        rows.append(MachineRow(run, cpu, accel, speedup, verdict))
    return rows


def _speedup(cpu: CaseResult, accel: CaseResult) -> float | None:
    """CPU epoch time / accelerator epoch time, as published; the throughput ratio without epochs."""
    cpu_epoch, accel_epoch = cpu.epoch_time(), accel.epoch_time()
    if cpu_epoch and accel_epoch and accel_epoch[0] > 0:
        return cpu_epoch[0] / accel_epoch[0]
    mine, theirs = accel.throughput(), cpu.throughput()
    return mine / theirs if mine and theirs else None


def compare_runs(runs: list[LabelledRun], with_reference: bool = False,
                 alpha: float = ALPHA) -> list[WorkloadComparison]:
    """One WorkloadComparison per (workload, mode) present in any run, in order of appearance.

    Only timing runs (kind "run") are compared: a parity check or a feature probe also holds cases,
    but their step times (if any) time something else and would only add misleading rows."""
    runs = [run for run in runs if run.record.kind == "run"]
    groups: dict[tuple[str, str], WorkloadComparison] = {}
    for run in runs:
        for case in run.record.cases:
            groups.setdefault((case.workload, case.mode), WorkloadComparison(case.workload, case.mode))
    for (workload, mode), group in groups.items():
        per_run = [(run, [c for c in run.record.cases if (c.workload, c.mode) == (workload, mode)])
                   for run in runs]
        for run, cases in per_run:
            if cases:
                group.rows.extend(_rows_for(run, cases))
        for (run_a, cases_a), (run_b, cases_b) in combinations(per_run, 2):
            for a in cases_a:
                for b in cases_b:
                    if device_kind(a.device) == device_kind(b.device):
                        group.pairs.append(Pair(run_a.label, run_b.label, a, b,
                                                compare_cases(a, b, alpha)))
        if with_reference:
            group.references = epoch_references(workload, mode)
    return list(groups.values())


def describe(verdict: Verdict) -> str:
    """A verdict as a short phrase: "1.32x faster (p=0.001)", "not comparable: batch size 64 vs 128"."""
    if verdict.verdict in (NOT_COMPARABLE, NOT_RUN, TOO_FEW):
        ratio = f" ({verdict.ratio:.2f}x, untested)" if verdict.ratio and verdict.verdict == TOO_FEW else ""
        return f"{verdict.verdict}{ratio}: {verdict.reason}"
    ratio = verdict.ratio or 0.0
    noisy = ", noisy" if verdict.noisy else ""
    if verdict.verdict == FASTER:
        return f"{ratio:.2f}x faster (p={verdict.p_value:.2g}{noisy})"
    if verdict.verdict == SLOWER:
        return f"{1 / ratio:.2f}x slower (p={verdict.p_value:.2g}{noisy})" if ratio else "slower"
    return f"same within noise ({ratio:.2f}x, p={verdict.p_value:.2g}{noisy})"
