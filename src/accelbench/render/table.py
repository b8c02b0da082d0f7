"""The end-of-run table, in the style of the published comparisons.

The default table holds the essentials and fits a 100-column terminal: workload, mode, device,
config, batch, samples/s with its 95% CI, epoch time, vs CPU, and a notes column (noisy, drift,
input-bound, the diagnosis word of a profiled case, a sustained run's "throttles 78%" or "holds",
when compiling pays off). ``wide=True`` adds the spread, FLOP/s (against the burst peak, and the
sustained one where ``roofline --sustained`` held it), memory, input wait, repeats, stop rule,
the first-use costs and profile figures. Diagnosis lines go under the table.
An input wait that is only an upper bound (the host's fetch time on MPS) is marked "≤" and never
called input-bound.
A peak-memory figure carries its source in one word (RSS, allocator, sampled: ``memory_tag``),
since the CPU's whole-process resident set and an accelerator's live tensors are not the same
quantity. It is the steady state's peak; the set-up's (building, warm-up: cuDNN's autotuning
workspaces under cudnn.benchmark) follows it where it was higher.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.markup import escape
from rich.text import Text

from accelbench.compare import SAME, speedup_vs_cpu
from accelbench.devices.power import busy_load
from accelbench.measure.trackers.memory import format_bytes
from accelbench.render.diagnosis import busy_share, diagnose
from accelbench.render.fit import FittedTable
from accelbench.render.format import format_interval, format_range, format_rate, format_seconds
from accelbench.render.peak_marks import flops_text
from accelbench.render.steady import break_even_cell, first_use_cell, sustained_note
from accelbench.results import INPUT_BOUND_FRACTION, CaseResult, Energy, RunRecord
from accelbench.results.key import config_label as key_config_label
from accelbench.results.stats import drift


def vs_cpu_cell(case: CaseResult, cases: list[CaseResult]) -> str:
    """The speedup over the same-work CPU case (the one comparability key), with "?" when the
    rule of ``compare`` cannot call it (one process a side: use --repeat)."""
    found = speedup_vs_cpu(case, cases)
    if found is None:
        return ""
    ratio, verdict = found
    return f"{ratio:.2f}x" + ("" if verdict.called or verdict.verdict == SAME else "?")


def config_label(case: CaseResult) -> str:
    """The comparability key's configuration words (precision, compile, layout, data, size),
    without the batch: the table has its own batch column."""
    return key_config_label(case).rsplit(" batch ", 1)[0]


def rate_cell(case: CaseResult) -> str:
    """Median samples/s ± the wider side of its 95% CI in percent (the interval is asymmetric:
    --wide and the result file have both ends), breakable so the column stays narrow."""
    rate, ci = case.throughput(), case.throughput_ci()
    tokens = case.tokens_per_s()
    per_token = f"\n{format_rate(tokens)} tok/s" if tokens else ""
    if not rate or not ci:
        return f"{format_rate(rate)} ±n/a{per_token}"
    interval = format_interval(rate, *ci)
    # An interval wider than the figure is said in words on its own line (the column is narrow).
    between = "\n" if interval.startswith("noise") else " "
    return f"{format_rate(rate)}{between}{interval}{per_token}"


def ci_cell(case: CaseResult) -> str:
    return format_range(case.throughput_ci())


def epoch_cell(case: CaseResult) -> str:
    epoch = case.epoch_time()
    return f"{format_seconds(epoch[0])} {epoch[3][:4]}." if epoch else "n/a"


def notes_cell(case: CaseResult) -> str:
    """Flags a reader must not miss, as short words: noisy, drift, input-bound, the diagnosis."""
    notes = []
    if noisy(case):
        notes.append("[yellow]noisy[/yellow]")
    trend = drift(case.step_times)
    if trend and trend["drifting"]:
        notes.append(f"[red]drift+{(trend['ratio'] - 1) * 100:.0f}%[/red]")
    diagnosis = diagnose(case)
    if case.input_bound() and (diagnosis is None or diagnosis.word != "input-bound"):
        notes.append("[yellow]input-bound[/yellow]")
    elif case.input_wait_is_upper_bound() and (case.input_fraction() or 0.0) > INPUT_BOUND_FRACTION:
        # The host's fetch time on an asynchronous device: a bound to look into, not a verdict.
        notes.append(f"[yellow]input wait {input_cell(case)}[/yellow]")
    if diagnosis is not None:
        notes.append(f"[bold]{diagnosis.word}[/bold]")
    held = sustained_note(case)
    if held:
        notes.append(held)
    paid = break_even_cell(case)
    if paid:
        notes.append(f"compile pays off {paid}" if paid != "never" else "compile never pays off")
    return " ".join(notes)


def noisy(case: CaseResult) -> bool:
    """The case's samples spread more than results/stats.NOISY_REL_IQR: a generation case's
    rounds (as stored: ``round_spread``), else its steps."""
    if case.generation and case.generation.noisy is not None:
        return case.generation.noisy
    summary = case.summary()
    return bool(summary and summary.noisy)


def busy_line(record: RunRecord) -> str:
    """"machine busy (load 1.9 per CPU): figures not reliable" where the run began on a machine
    whose 1-minute load per CPU (the environment's power facts) was at least BUSY_LOAD; else ""."""
    load = busy_load(record.environment)
    return f"machine busy (load {load:g} per CPU): figures not reliable" if load is not None else ""


def spread_cell(case: CaseResult) -> str:
    summary = case.summary()
    return f"{summary.rel_iqr * 100:.1f}%" if summary else "n/a"


#: Where a peak-memory figure comes from, in one word (the result keeps the full words):
#: the whole process's peak resident set (the CPU), the device allocator's peak of live tensors
#: (CUDA, XPU, MPS with a counter), or live tensors sampled now and then (a lower bound).
MEMORY_TAGS = ("RSS", "allocator", "sampled")


def memory_tag(case: CaseResult) -> str:
    """The short source tag of a case's peak memory, from the source the runner recorded; "" for
    a result that recorded none."""
    source = case.memory_source
    if "RSS" in source:
        return "RSS"
    if case.memory_is_lower_bound or "lower bound" in source or "sampled" in source:
        return "sampled"
    return "allocator" if source else ""


def memory_cell(case: CaseResult) -> str:
    """The steady state's peak memory and its source tag, then the set-up's peak where it was
    higher ("1.2 GiB allocator (set-up 5.8 GiB)"); "≥" where the device's figure can be below
    the true peak (sampled on MPS)."""
    if case.peak_memory_bytes is None:
        return "n/a"
    lower = case.memory_is_lower_bound or "lower bound" in case.memory_source
    text = ("≥ " if lower else "") + format_bytes(case.peak_memory_bytes)
    tag = memory_tag(case)
    text = f"{text} {tag}" if tag else text
    setup = case.setup_peak_memory_bytes
    if setup is not None and setup > case.peak_memory_bytes \
            and format_bytes(setup) != format_bytes(case.peak_memory_bytes):
        text += f" (set-up {format_bytes(setup)})"
    return text


def input_cell(case: CaseResult) -> str:
    """The input wait's share of the measured time; "≤" where it is an upper bound (the host's
    fetch time on an asynchronous device, during which the device may have been busy)."""
    fraction = case.input_fraction()
    if fraction is None:
        return "n/a"
    return ("≤ " if case.input_wait_is_upper_bound() else "") + f"{fraction * 100:.0f}%"


def repeats_cell(case: CaseResult) -> str:
    return str(len(case.repeats)) if getattr(case, "repeats", None) else "1"


def stop_cell(case: CaseResult) -> str:
    """Why measuring stopped and the precision the median reached (its CI half-width): the
    median TPOT's across rounds for a generation case."""
    reached = generation_precision(case) if case.generation else case.precision_reached()
    precision = f"(median ±{reached * 100:.1f}%)" if reached is not None else ""
    return " ".join(part for part in (case.stop_reason or case.stop_rule, precision) if part)


def generation_precision(case: CaseResult) -> float | None:
    """The median TPOT's 95% interval half-width (the wider side) over the median, as stored."""
    tpot = case.generation.tpot_s if case.generation else None
    interval = case.generation.tpot_ci_s if case.generation else None
    if tpot is None or tpot <= 0 or interval is None:
        return None
    return max(tpot - interval[0], interval[1] - tpot) / tpot


def profile_cell(case: CaseResult) -> str:
    if case.profile is None:
        return ""
    figures = case.profile.figures
    if figures is None:
        return "failed"
    busy = busy_share(case, figures)  # against the measured step (the profiler slows steps)
    busy_text = f"{busy * 100:.0f}% busy" if busy is not None else "busy n/a"
    return f"{busy_text}, {figures.kernels_per_step:.0f}/step"


Cell = Callable[[CaseResult], str]
#: The columns --wide adds after the essentials, each with the function that fills it.
WIDE_COLUMNS: tuple[tuple[str, Cell], ...] = (
    ("95% CI", ci_cell), ("IQR/med", spread_cell), ("GFLOP/s (% peak)", flops_text),
    ("peak mem", memory_cell),
    ("input wait", input_cell), ("repeats", repeats_cell), ("stop", stop_cell),
    ("first use", first_use_cell), ("profile", profile_cell),
)
ESSENTIAL_COLUMNS = ("workload", "mode", "device", "config", "batch", "samples/s ±95% CI", "epoch",
                     "vs CPU", "notes")
COLUMNS = ESSENTIAL_COLUMNS[:-1] + tuple(name for name, _ in WIDE_COLUMNS) + ESSENTIAL_COLUMNS[-1:]


def case_row(case: CaseResult, cases: list[CaseResult], wide: bool = False) -> list[str]:
    head = [escape(case.workload), case.mode, case.device, escape(config_label(case)),
            str(case.batch_size)]
    extra_count = len(WIDE_COLUMNS) if wide else 0
    if not case.ok:  # the status where the rate would be, the error's first line in the notes
        return [*head, f"[red]{case.status}[/red]", "", "", *[""] * extra_count,
                escape(case.error.splitlines()[0] if case.error else "")]
    wide_cells = [escape(cell(case)) if cell is not profile_cell else cell(case)
                  for _, cell in WIDE_COLUMNS] if wide else []
    return [*head, rate_cell(case), epoch_cell(case), vs_cpu_cell(case, cases), *wide_cells,
            notes_cell(case)]


_LEFT = ("workload", "mode", "device", "config", "notes")
#: What the essential table leaves out when even its narrowest layout is too wide (render/fit.py);
#: --wide leaves out nothing: it is split into parts that each repeat a row's name.
_DROP = ("epoch", "vs CPU")
_NAME = ("workload", "mode", "device")
#: Figures: never wrapped.
_WHOLE = ("batch", "samples/s ±95% CI", "vs CPU", "95% CI", "IQR/med", "repeats")


def run_table(record: RunRecord, wide: bool = False) -> FittedTable:
    """The run table, fitted to the console (render/fit.py): cells wrap between words, figures
    never; at a narrow width the columns in ``_DROP`` go first, and a line says which; then the
    table is split into parts that each repeat the row's name (``--wide`` on 100 columns)."""
    columns = COLUMNS if wide else ESSENTIAL_COLUMNS
    rows = [[Text.from_markup(cell) for cell in case_row(case, record.cases, wide)]
            for case in record.cases]
    return FittedTable(f"accelbench run {record.run_id}  (epoch: meas. = measured, proj. = "
                       "projected from the mean step)", columns, rows,
                       right=[c for c in columns if c not in _LEFT], whole=_WHOLE,
                       drop=() if wide else _DROP, stack=_NAME,
                       hint="a wider terminal, --wide or --json shows them")


def diagnosis_lines(record: RunRecord) -> list[str]:
    """One line per profiled case: the diagnosis with its figures and the top op (plain text)."""
    lines = []
    for case in record.cases:
        if case.profile is None:
            continue
        name = f"{case.workload} {case.mode} {case.device}"
        diagnosis = diagnose(case)
        if diagnosis is None:
            lines.append(f"profile {name}: {case.profile.error or 'no figures'}")
            continue
        top = diagnosis.top_ops_text(1)
        top_text = f"; top: {top}/step" if top else ""
        lines.append(f"{diagnosis.word} {name}: {diagnosis.line}{top_text}")
    return lines


def energy_lines(record: RunRecord) -> list[str]:
    """One line per case with energy figures, or one line saying why there are none."""
    lines, reasons = [], set()
    for case in record.cases:
        energy = case.energy
        if energy is None:
            continue
        if energy.joules is not None:
            lines.append(f"energy {case.workload} {case.mode} {case.device}: "
                         f"{_energy_figures(energy)} ({energy.source})")
        elif energy.reason:
            reasons.add(f"{case.device}: {energy.reason}")
    lines.extend(f"energy n/a on {reason}" for reason in sorted(reasons))
    return lines


def _energy_figures(energy: Energy) -> str:
    """A generation case's J/token and J/round (its timed rounds); a step case's J/step, with
    J/epoch and samples/J where there is an epoch."""
    if energy.joules_per_token is not None:
        return f"{energy.joules_per_token:.3g} J/token, {energy.joules_per_round:.3g} J/round"
    per_epoch = energy.joules_per_epoch
    if not per_epoch:
        return f"{energy.joules_per_step:.3g} J/step"
    return (f"{energy.joules_per_step:.3g} J/step, {per_epoch:.3g} J/epoch, "
            f"{energy.samples_per_joule:.3g} samples/J")
