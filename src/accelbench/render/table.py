"""The end-of-run table, in the style of the published comparisons."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from accelbench.measure.memory import format_bytes
from accelbench.measure.stats import drift
from accelbench.render.format import format_rate, format_seconds
from accelbench.results import CaseResult, RunRecord


def speedup_vs_cpu(case: CaseResult, cases: list[CaseResult]) -> float | None:
    """Throughput ratio against the CPU case of the same workload, mode, batch and precision."""
    if case.device == "cpu" or not case.ok:
        return None
    for other in cases:
        if (other.device == "cpu" and other.ok and other.workload == case.workload
                and other.mode == case.mode and other.batch_size == case.batch_size
                and other.precision == case.precision):
            mine, theirs = case.throughput(), other.throughput()
            if mine and theirs:
                return mine / theirs
    return None


def config_label(case: CaseResult) -> str:
    parts = [case.precision]
    if case.compile_backend:
        parts.append(f"compile:{case.compile_backend}")
    if case.channels_last:
        parts.append("channels-last")
    return " ".join(parts)


def case_row(case: CaseResult, cases: list[CaseResult]) -> list[str]:
    head = [escape(case.workload), case.mode, case.device, config_label(case), str(case.batch_size)]
    if not case.ok:
        first_line = case.error.splitlines()[0] if case.error else ""
        message = f"[red]{case.status}[/red] {escape(first_line[:70])}"
        return [*head, message, "", "", "", "", "", ""]
    summary = case.summary()
    ci = case.throughput_ci()
    rate = format_rate(case.throughput())
    if case.input_bound():
        rate = f"[yellow]{rate} input-bound[/yellow]"
    ci_text = f"{format_rate(ci[0])}–{format_rate(ci[1])}" if ci else "n/a"
    epoch = case.epoch_time()
    epoch_text = "n/a"
    if epoch:
        epoch_text = f"{format_seconds(epoch[0])} {epoch[3][:4]}."
    spread = "n/a"
    if summary:
        spread = f"{summary.rel_iqr * 100:.1f}%"
        if summary.noisy:
            spread = f"[yellow]{spread} noisy[/yellow]"
        trend = drift(case.step_times)
        if trend and trend["drifting"]:
            spread += f" [red]drift +{(trend['ratio'] - 1) * 100:.0f}%[/red]"
    speedup = speedup_vs_cpu(case, cases)
    return [*head, rate, ci_text, epoch_text,
            spread, f"{speedup:.2f}x" if speedup else "", flops_text(case),
            format_bytes(case.peak_memory_bytes)]


def flops_text(case: CaseResult) -> str:
    flops = case.extra.get("flops", {})
    achieved, fraction = flops.get("achieved_flops"), flops.get("fraction_of_peak")
    if not isinstance(achieved, int | float):
        return "n/a"
    text = format_rate(achieved / 1e9)
    return f"{text} ({fraction * 100:.0f}%)" if isinstance(fraction, int | float) else text


COLUMNS = ("workload", "mode", "device", "config", "batch", "samples/s", "95% CI", "epoch", "IQR/med",
           "vs CPU", "GFLOP/s (% peak)", "peak mem")


def run_table(record: RunRecord) -> Table:
    table = Table(title=f"accelbench run {record.run_id}  (epoch: meas. = measured, "
                  "proj. = projected from the mean step)", title_justify="left")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("workload", "mode", "device")
                         else "right")
    for case in record.cases:
        table.add_row(*case_row(case, record.cases))
    return table


def energy_lines(record: RunRecord) -> list[str]:
    """One line per case with energy figures, or one line saying why there are none."""
    lines, reasons = [], set()
    for case in record.cases:
        energy = case.extra.get("energy")
        if not energy:
            continue
        if isinstance(energy.get("joules"), int | float):
            per_epoch = energy.get("joules_per_epoch")
            lines.append(f"energy {case.workload} {case.mode} {case.device}: "
                         f"{energy['joules_per_step']:.3g} J/step, "
                         f"{per_epoch:.3g} J/epoch, {energy['samples_per_joule']:.3g} samples/J "
                         f"({energy['source']})" if per_epoch else
                         f"energy {case.workload} {case.mode} {case.device}: "
                         f"{energy['joules_per_step']:.3g} J/step ({energy['source']})")
        elif energy.get("reason"):
            reasons.add(f"{case.device}: {energy['reason']}")
    lines.extend(f"energy n/a on {reason}" for reason in sorted(reasons))
    return lines
