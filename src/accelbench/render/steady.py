"""Before the steady state and over minutes: first-use costs, compile break-even and the
sustained verdict, as table cells, lines under the run table, and rows for ``compare`` and the
report (one source for all three, so they cannot disagree)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from accelbench.render.format import format_rate, format_seconds
from accelbench.results import CaseResult, RunRecord
from accelbench.results.first_use import GENERATION, STEP, BreakEven, Cost, FirstUse, plural
from accelbench.results.key import config_label
from accelbench.results.sustained import THROTTLES, SustainedRecord

#: Columns of the rows ``compare`` and the report show (after the run's letter or label).
STEADY_COLUMNS = ("workload", "mode", "device", "config", "first step", "warm-up",
                  "compile / first use", "compile pays off", "burst → sustained")
STEADY_NOTE = ("first step: the first step's time, set-up excluded (a generation case: its first "
               "whole generation); warm-up: its steps (generations), the first included; compile: "
               "the warm-up less as many steady steps (compiled cases, compiled into empty caches); "
               "first use: the first step less a steady step (a device's shader or kernel set-up); "
               "\"warm\": not the first case of its process, so these are not a cold start's; "
               "compile pays off: the compile time (less the uncompiled warm-up's own excess) over "
               "the time a compiled step saves against the same work uncompiled (--compile "
               "inductor,none); burst → sustained: --sustained runs, the last half's throughput "
               "over the first fifth's")


def cost_words(cost: Cost | None, unit: str = STEP) -> str:
    """A first-use or compile cost as every surface says it: its seconds, or where the first
    step (the warm-up's steps; generations for a generation case) took no longer than as many
    steady ones, "≈0" with why: a negative difference is the steady steps' noise, not a saving."""
    if cost is None:
        return "n/a"
    if cost.seconds <= 0:
        first = (f"the first {unit}" if cost.steps == 1
                 else f"the warm-up's {cost.steps} {plural(unit, cost.steps)}")
        return f"≈0 ({first} no slower than the rest)"
    return format_seconds(cost.seconds)


def _started(costs: FirstUse) -> str:
    """" (warm: 1 case ran before it in its process)" where the figures are not a cold start's."""
    return f" ({costs.caveat})" if costs.caveat else ""


def first_use_cell(case: CaseResult) -> str:
    """"1st 520 ms · warm-up 1.10 s/3 · compile 10.2 s" (--wide's first-use column); a generation
    case counts generations ("warm-up 1.10 s/1 gen"); a warm case says so."""
    costs = case.first_use()
    unit = " gen" if costs.unit == GENERATION else ""
    parts = [f"1st{unit} {format_seconds(costs.time_to_first_step_s)}",
             f"warm-up {format_seconds(costs.warmup_s)}/{costs.warmup_steps}{unit}"]
    if costs.compile is not None:
        parts.append(f"compile {cost_words(costs.compile, costs.unit)}")
    elif costs.first_use is not None:
        parts.append(f"first use {cost_words(costs.first_use, costs.unit)}")
    return " · ".join(parts) + _started(costs)


def break_even_cell(case: CaseResult) -> str:
    figure = case.break_even
    if figure is None:
        return ""
    if figure.pays_off and figure.steps is not None:
        count = math.ceil(figure.steps)
        return (f"after {count:,} {plural(figure.unit, count)}" if figure.steps
                else f"from the first {figure.unit}")
    return "never"


def sustained_note(case: CaseResult) -> str:
    """The notes column's word: "throttles 78%" (red), "holds", "sustained: can't tell"."""
    record = case.sustained
    if record is None:
        return ""
    note = record.figures.note
    if record.figures.verdict == THROTTLES:
        return f"[red]{note}[/red]"
    return note or "[yellow]sustained: can't tell[/yellow]"


def sustained_cell(case: CaseResult) -> str:
    record = case.sustained
    if record is None:
        return ""
    figures = record.figures
    if figures.burst is None or figures.sustained is None:
        return figures.verdict
    scale = case.batch_size if record.kind == "case" else 1.0
    return (f"{format_rate(figures.burst * scale)} → {format_rate(figures.sustained * scale)}/s: "
            f"{figures.note or figures.verdict}")


def _name(case: CaseResult) -> str:
    return f"{case.workload} {case.mode} {case.device} {config_label(case)}"


def sustained_line(record: SustainedRecord, name: str, per_step: float = 1.0) -> str:
    """One line: burst and sustained rates, the ratio's interval, the verdict and its cause."""
    figures, series = record.figures, record.series
    unit = "samples/s" if record.kind == "case" else f"{figures.unit}/s"
    rates = ""
    if figures.burst is not None and figures.sustained is not None:
        rates = (f"burst {format_rate(figures.burst * per_step)} {unit} (first "
                 f"{figures.burst_intervals} intervals), sustained "
                 f"{format_rate(figures.sustained * per_step)} (last {figures.sustained_intervals}); ")
    return (f"sustained {name}: {rates}{figures.describe()} "
            f"[{series.duration_s / 60:g} min in {series.interval_s:g} s intervals]")


def sustained_lines(record: RunRecord) -> list[str]:
    return [sustained_line(found, _name(case), case.batch_size)
            for case in record.cases if (found := case.sustained) is not None]


def _charged(figure: BreakEven) -> str:
    """The compile time the break-even charged, where the uncompiled warm-up's own excess (first-use
    costs both sides pay) was taken off it."""
    if figure.charged_s is None or not figure.uncompiled_warmup_s or figure.uncompiled_warmup_s <= 0:
        return ""
    return (f" ({format_seconds(figure.charged_s)} charged: the uncompiled warm-up's own "
            f"{format_seconds(figure.uncompiled_warmup_s)} taken off)")


def break_even_lines(record: RunRecord) -> list[str]:
    """One line per compiled case with an uncompiled counterpart: when compiling pays off."""
    lines = []
    for case in record.cases:
        figure = case.break_even
        if figure is not None:
            lines.append(f"{_name(case)}: compile time {format_seconds(figure.compile_s)}"
                         f"{_charged(figure)}, {figure.speedup:.2f}x the uncompiled {figure.unit}; "
                         f"{figure.describe()}")
    return lines


def steady_rows(cases: Sequence[tuple[str, CaseResult]]) -> list[list[str]]:
    """(run label, case) -> the rows of ``STEADY_COLUMNS`` (with the label first); cases that did
    not finish, and those that recorded none of these figures, are left out."""
    rows = []
    for label, case in cases:
        if not case.ok:
            continue
        costs = case.first_use()
        cost = costs.compile or costs.first_use
        kind = "compile" if costs.compile is not None else "first use"
        count = plural(costs.unit, costs.warmup_steps)
        figure = case.break_even
        if costs.time_to_first_step_s is None and figure is None and case.sustained is None:
            continue  # a record that kept none of these figures (an old file, a peer's share)
        rows.append([label, case.workload, case.mode, case.device, config_label(case),
                     format_seconds(costs.time_to_first_step_s),
                     f"{format_seconds(costs.warmup_s)} ({costs.warmup_steps} {count})",
                     f"{kind} {cost_words(cost, costs.unit)}{_started(costs)}" if cost is not None else "n/a",
                     figure.describe().removeprefix("compile ") if figure is not None else "",
                     sustained_cell(case)])
    return rows
