"""Compare runs: per workload and mode, machine rows in the published style plus pairwise verdicts.

What is compared. Two cases are compared only when they did the same work: the one comparability
key of ``results/key.py`` (workload and its version, mode, batch, precision, compile back end,
memory format, data kind and mode, size). Everything else is "not comparable" with the reason. A
case that did not finish ("oom", "failed", ...) is shown with its status, never as a number.

Two generation cases of the same work whose decode was overhead-bound on either side (the host's
launches, not the device: ``decode_diagnosis.py``) are compared only when the same host CPU model
drove both; otherwise "not comparable", naming the two CPUs.

Settings that change the speed but not the work (threads, cudnn.benchmark) do not stop a
comparison; a run-against-run pair names any difference in them beside its verdict, as it does
for the power state.

How a difference is called: ``compare/verdict.py``, across worker processes (``--repeat``), with
"can't tell" when the processes are too few. The same rule gives run-against-run pairs,
machine-against-machine rows, the accelerator's speedup over the same run's CPU (the run table's
"vs CPU" cell and the report call ``speedup_vs_cpu``) and the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import combinations

from accelbench.compare.decode_diagnosis import DecodeDiagnosis, host_mismatch
from accelbench.compare.verdict import (
    CANT_TELL,
    FASTER,
    MIN_EFFECT,
    NOT_COMPARABLE,
    NOT_RUN,
    SAME,
    SLOWER,
    Verdict,
    describe,
    judge,
)
from accelbench.devices.power import power_differences
from accelbench.reference.published import EpochReference, epoch_references
from accelbench.results import CaseResult, RunRecord
from accelbench.results.key import comparability_key, incomparable_reasons, setting_differences
from accelbench.results.process import process_step_times

__all__ = ["CANT_TELL", "FASTER", "NOT_COMPARABLE", "NOT_RUN", "SAME", "SLOWER", "LabelledRun",
           "MachineRow", "Pair", "Verdict", "WorkloadComparison", "compare_cases", "compare_runs",
           "cpu_counterpart", "describe", "shown_ratio", "speedup_vs_cpu"]


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
class MachineRow:
    """One row of a published-style table: a run's CPU case and (at most) one accelerator case of
    the same configuration; ``speedup`` is the accelerator's throughput over the CPU's."""

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
    #: How the two runs' power states differ ("" when they do not, or when neither says).
    power_note: str = ""
    #: How the two cases' speed-only settings differ (threads, cudnn.benchmark); "" when not.
    settings_note: str = ""


@dataclass
class WorkloadComparison:
    workload: str
    mode: str
    rows: list[MachineRow] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    references: list[EpochReference] = field(default_factory=list)


def device_kind(device: str) -> str:
    return device.split(":", 1)[0]


def compare_cases(a: CaseResult, b: CaseResult, min_effect: float = MIN_EFFECT) -> Verdict:
    """Is B faster than A? Comparable work first, then the rule of compare/verdict.py."""
    reasons = incomparable_reasons(a, b)
    if reasons:
        return Verdict(NOT_COMPARABLE, reason="; ".join(reasons))
    if not (a.ok and b.ok):
        failed = [f"{label} {case.status}" for label, case in (("A", a), ("B", b)) if not case.ok]
        return Verdict(NOT_RUN, reason=", ".join(failed))
    # An overhead-bound decode measured its host's launches: compared only on the same host CPU model.
    aside = host_mismatch(DecodeDiagnosis.of_case(a), DecodeDiagnosis.of_case(b))
    if aside:
        return Verdict(NOT_COMPARABLE, reason=aside)
    noisy = any(s.noisy for s in (a.summary(), b.summary()) if s is not None)
    return shown_ratio(judge(process_step_times(a), process_step_times(b), min_effect, noisy=noisy),
                       a, b)


def shown_ratio(verdict: Verdict, a: CaseResult, b: CaseResult) -> Verdict:
    """The verdict with its ratio as B's headline rate over A's (results/catalogue.headline),
    the figures the rows show, so "vs" never reads another statistic than the rows beside it.
    The call and its interval stay the process rule's; a call the rates contradict (the
    processes' lower tails and the medians disagree on the direction) is not made."""
    rate_a, rate_b = a.throughput(), b.throughput()
    if not rate_a or not rate_b or verdict.ratio is None:
        return verdict
    ratio = rate_b / rate_a
    if (verdict.verdict == FASTER and ratio < 1) or (verdict.verdict == SLOWER and ratio > 1):
        return replace(verdict, verdict=CANT_TELL, ratio=ratio,
                       reason="the processes' fastest steps and the medians disagree on which is faster")
    return replace(verdict, ratio=ratio)


def cpu_counterpart(case: CaseResult, cases: list[CaseResult]) -> CaseResult | None:
    """The CPU case of ``cases`` that did the same work as ``case`` (None for a CPU case)."""
    if device_kind(case.device) == "cpu":
        return None
    key = comparability_key(case)
    return next((other for other in cases
                 if device_kind(other.device) == "cpu" and comparability_key(other) == key), None)


def speedup_vs_cpu(case: CaseResult, cases: list[CaseResult]) -> tuple[float, Verdict] | None:
    """The "vs CPU" cell: the accelerator's throughput over the same-work CPU case's, with the
    verdict of the one rule (one process a side gives "can't tell"). None when there is no such
    CPU case or either did not finish."""
    cpu = cpu_counterpart(case, cases)
    if cpu is None:
        return None
    verdict = compare_cases(cpu, case)
    return (verdict.ratio, verdict) if verdict.ratio is not None else None


def _rows_for(run: LabelledRun, cases: list[CaseResult]) -> list[MachineRow]:
    """One row per configuration and accelerator; a configuration run only on the CPU (or only
    on an accelerator) still gets its row."""
    configs: dict[tuple[object, ...], list[CaseResult]] = {}
    for case in cases:
        configs.setdefault(comparability_key(case), []).append(case)
    rows = []
    for same_work in configs.values():
        cpu = next((c for c in same_work if device_kind(c.device) == "cpu"), None)
        accels = [c for c in same_work if device_kind(c.device) != "cpu"]
        if not accels:
            rows.append(MachineRow(run, cpu, None, None, None))
        for accel in accels:
            # A failed side has a verdict ("did not run") but no speedup.
            verdict = compare_cases(cpu, accel) if cpu is not None else None
            speedup = verdict.ratio if verdict is not None else None
            rows.append(MachineRow(run, cpu, accel, speedup, verdict))
    return rows


def _pairs_for(run_a: LabelledRun, cases_a: list[CaseResult], run_b: LabelledRun,
               cases_b: list[CaseResult], min_effect: float) -> list[Pair]:
    """Same device kind and same work are compared; a case with no same-work partner on that
    device kind in the other run is shown against the others as "not comparable", with why."""
    note = power_differences(run_a.record.environment, run_b.record.environment)
    pairs = []
    for a in cases_a:
        same_kind = [b for b in cases_b if device_kind(a.device) == device_kind(b.device)]
        matched = [b for b in same_kind if comparability_key(a) == comparability_key(b)]
        for b in matched or [b for b in same_kind if not any(
                comparability_key(b) == comparability_key(x) for x in cases_a
                if device_kind(x.device) == device_kind(b.device))]:
            pairs.append(Pair(run_a.label, run_b.label, a, b, compare_cases(a, b, min_effect), note,
                              "; ".join(setting_differences(a, b))))
    return pairs


def compare_runs(runs: list[LabelledRun], with_reference: bool = False,
                 min_effect: float = MIN_EFFECT) -> list[WorkloadComparison]:
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
            group.pairs.extend(_pairs_for(run_a, cases_a, run_b, cases_b, min_effect))
        if with_reference:
            group.references = epoch_references(workload, mode)
    return list(groups.values())
