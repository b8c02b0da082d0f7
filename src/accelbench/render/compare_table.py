"""Comparison tables: one compact table per workload and mode, shared by the terminal and the report.

Each run gets a letter (A, B, ...). A row is one run's machine row in the published style (CPU
rate and epoch time, accelerator, its rate and epoch time, speedup), and its "vs" cell holds, for
each device kind in the row, the verdict against the earliest earlier run that did the same work:
a short word and the ratio of the rate columns ("0.89x can't tell¹"). The rate is the case's
headline figure (results/catalogue.headline: samples/s, a generation case's decode tokens/s, a
--protocol case's peer's rate), the one every ratio and speedup is computed from, named in the
header (or in each cell where a table's rows count different things); the epoch (train and eval
only) is shown beside it, as published, and never compared. What a verdict rests on (processes, the reason it
cannot be called, why two cases are not comparable, a power-state difference) is a footnote, each
text once for the whole comparison, and the rule itself is said once at the end. Empty columns
(the accelerator columns of a CPU-only comparison) are left out. Cells are plain text; the
terminal wraps them between words only (render/fit.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Group
from rich.text import Text

from accelbench.compare import MachineRow, Pair, WorkloadComparison, describe
from accelbench.compare.decode_diagnosis import DecodeDiagnosis
from accelbench.compare.verdict import CANT_TELL, FASTER, NOT_COMPARABLE, NOT_RUN, SAME, SLOWER, Verdict
from accelbench.measure.trackers.memory import format_bytes
from accelbench.reference.published import (
    EPOCH_REFERENCES,
    FEATURE_FINDINGS,
    MODEL_SIZES,
    PUBLISHED_LABEL,
    RATIO_CLAIMS,
    EpochReference,
)
from accelbench.render.fit import FittedTable, Footnotes, Prose, non_empty_columns
from accelbench.render.format import format_rate, format_seconds
from accelbench.render.generation_execution import bound_words, execution_words
from accelbench.render.steady import STEADY_COLUMNS, STEADY_NOTE, steady_rows
from accelbench.render.words import shorten
from accelbench.results import CaseResult
from accelbench.results.generation import Generation
from accelbench.results.key import config_label

COLUMNS = ("", "run", "machine", "memory", "config", "CPU rate", "CPU epoch", "accelerator",
           "accel. rate", "accel. epoch", "speedup", "vs")
RIGHT = ("memory", "CPU rate", "CPU epoch", "accel. rate", "accel. epoch", "speedup")
#: How verdicts are reached: said once per comparison (terminal and HTML).
RULE_CAPTION = ("faster/slower only when the 95% interval of the throughput ratio across worker "
                "processes (--repeat) excludes 1 and the ratio is beyond the +-5% noise band; "
                "same within noise when the interval lies inside it; can't tell otherwise "
                "(fewer than 4 processes a side are never called)")
EPOCH_NOTE = ("epoch: meas. = whole epochs ran; proj. = dataset size / batch x mean step time (shown "
              "as published, not compared: the ratios are the rate's)")
VS_NOTE = ("vs: each device's rate (the rate column: median samples/s, or a generation case's "
           "tokens/s as named) over the same work's in the earlier run of that letter "
           "(0.89x = 11% fewer), [95% interval]")
NOISY_NOTE = "noisy: a side's step times spread by more than 10% of their median (IQR)"
SPEEDUP_NOTE = "speedup: the accelerator's rate over the same run's CPU's; ? = can't tell yet"
_SHORT = {FASTER: "faster", SLOWER: "slower", SAME: "same", CANT_TELL: "can't tell",
          NOT_COMPARABLE: "not comparable", NOT_RUN: "did not run"}


@dataclass
class PlainTable:
    """A table as plain strings: the terminal fits it, the report escapes it."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    published: list[bool] = field(default_factory=list)


@dataclass
class Layout:
    tables: list[PlainTable]
    #: Said once under all the tables: footnotes, then the explanations that apply.
    notes: list[str]


def letter(index: int) -> str:
    return chr(ord("A") + index) if index < 26 else f"R{index + 1}"


def _decode_mark(case: CaseResult, notes: Footnotes | None) -> str:
    """A generation case's bound in a few words, its execution and whole bound in a footnote."""
    diagnosis = DecodeDiagnosis.of_case(case)
    if diagnosis is None or not diagnosis.short_bound():
        return ""
    generation = case.generation or Generation()
    words = "; ".join(w for w in (execution_words(generation.execution), bound_words(generation)) if w)
    return f", {diagnosis.short_bound()}" + (notes.add(f"{case.workload} {case.device} "
                                                       f"{case.precision}: {words}") if notes else "")


def rate_cell(case: CaseResult | None, notes: Footnotes | None = None, unit: bool = True) -> str:
    """The figure a row's ratios are computed from: the case's headline rate ("1,610 samples/s",
    "2,789 decode tokens/s"; without ``unit`` where the header names it), a generation case's with
    its decode bound (and, given ``notes``, its execution in a footnote); the status of a case
    that did not finish."""
    if case is None:
        return ""
    if not case.ok:
        first = shorten(case.error, 60)
        return f"{case.status}: {first}" if first else case.status
    rate = case.throughput()
    if not rate:
        return "n/a"
    text = f"{format_rate(rate)} {case.rate_unit()}" if unit else format_rate(rate)
    return text + (_decode_mark(case, notes) if case.mode == "generate" else "")


def epoch_cell(case: CaseResult | None) -> str:
    """Epoch time, measured or projected ("41.6 ms proj."); "" where the case has none (a
    generation case, a workload without a dataset size, a case that did not finish)."""
    epoch = case.epoch_time() if case is not None and case.ok else None
    return f"{format_seconds(epoch[0])} {epoch[3][:4]}." if epoch else ""


def rate_header(group: WorkloadComparison) -> str:
    """The rate columns' unit where every case of the table counts the same thing ("samples/s"),
    else "" (each cell then names its own: a --protocol table's pp and tg rows)."""
    units = {case.rate_unit() for row in group.rows for case in (row.cpu, row.accel) if case is not None}
    return units.pop() if len(units) == 1 else ""


def speedup_cell(row: MachineRow) -> str:
    verdict = row.speedup_verdict
    if verdict is None:
        return ""
    if row.speedup is None:
        return _SHORT.get(verdict.verdict, verdict.verdict)
    return f"{row.speedup:.2f}x" + ("" if verdict.called or verdict.verdict == SAME else "?")


def verdict_word(verdict: Verdict, notes: Footnotes, power_note: str = "", against: str = "",
                 settings_note: str = "") -> str:
    """"0.89x can't tell¹", "1.32x faster [1.25–1.40]": the throughput ratio, the word, the 95%
    interval where there is one, and a mark for what stops it being called."""
    word = _SHORT.get(verdict.verdict, verdict.verdict)
    text = f"{verdict.ratio:.2f}x {word}" if verdict.ratio is not None else word
    if verdict.low is not None and verdict.high is not None:
        text += f" [{verdict.low:.2f}–{verdict.high:.2f}]"
    if verdict.noisy:
        text += " noisy"
    marks = ""
    if verdict.verdict == CANT_TELL and verdict.reason:
        marks += notes.add(f"can't tell: {verdict.reason}")
    elif verdict.verdict in (NOT_COMPARABLE, NOT_RUN):
        marks += notes.add(describe(verdict))
    if power_note:
        marks += notes.add(f"power state against {against} differs: {power_note}")
    if settings_note:
        # Settings that change speed but not the work (threads, cudnn.benchmark): still compared.
        marks += notes.add(f"settings against {against} differ: {settings_note}")
    return text + marks


def _earliest_pair(case: CaseResult, pairs: list[Pair], earlier: list[str]) -> Pair | None:
    """The pair of ``case`` against the earliest earlier run that did the same work (else the
    earliest earlier run it could not be compared with)."""
    mine = [p for p in pairs if p.b is case and p.a_label in earlier]
    mine.sort(key=lambda p: earlier.index(p.a_label))
    comparable = [p for p in mine if p.verdict.verdict != NOT_COMPARABLE]
    found = comparable or mine
    return found[0] if found else None


def vs_cell(row: MachineRow, group: WorkloadComparison, letters: dict[str, str], notes: Footnotes) -> str:
    """With two runs the header says which ("vs A"); with more, each verdict names its run."""
    labels = list(dict.fromkeys(r.run.label for r in group.rows))
    earlier = labels[:labels.index(row.run.label)]
    name_run = len(labels) > 2
    cells = []
    cases = [case for case in (row.cpu, row.accel) if case is not None]
    for case in cases:
        pair = _earliest_pair(case, group.pairs, earlier)
        if pair is None:
            continue
        text = verdict_word(pair.verdict, notes, pair.power_note,
                            f"{letters.get(pair.a_label, pair.a_label)}", pair.settings_note)
        parts = [case.device.split(":", 1)[0]] if len(cases) > 1 else []
        if name_run:
            parts.append(letters.get(pair.a_label, pair.a_label))
        cells.append(f"{' '.join(parts)}: {text}" if parts else text)
    return "; ".join(cells)


def machine_cells(row: MachineRow, group: WorkloadComparison, letters: dict[str, str],
                  notes: Footnotes) -> list[str]:
    accel = row.accel
    accel_name = ""
    if accel is not None:
        accel_name = f"{accel.device} ({accel.device_name})" if accel.device_name else accel.device
    either = row.cpu or accel
    unit = not rate_header(group)
    return [letters.get(row.run.label, ""), row.run.label, row.run.machine,
            format_bytes(row.run.memory_bytes) if row.run.memory_bytes else "",
            config_label(either) if either else "", rate_cell(row.cpu, notes, unit),
            epoch_cell(row.cpu), accel_name, rate_cell(accel, notes, unit), epoch_cell(accel),
            speedup_cell(row), vs_cell(row, group, letters, notes)]


def published_time(seconds: float | None) -> str:
    """A published time with the digits it was published with (6.75 min stays 6.75, not 6.8)."""
    if seconds is None:
        return "n/a"
    return f"{seconds / 60:.4g} min" if seconds >= 120 else f"{seconds:.4g} s"


def reference_cells(ref: EpochReference) -> list[str]:
    speedup = ref.speedup
    if speedup is None and ref.cpu_epoch_s and ref.accel_epoch_s:
        speedup = ref.cpu_epoch_s / ref.accel_epoch_s
    derived = " (derived)" if ref.derived else ""
    return ["", "published", ref.machine, f"{ref.memory_gb:g} GB" if ref.memory_gb else "",
            f"batch {ref.batch_size}", "", published_time(ref.cpu_epoch_s), ref.accelerator or "",
            "", published_time(ref.accel_epoch_s) + (derived if ref.accel_epoch_s else ""),
            f"{speedup:.2f}x" if speedup else "", ""]


def run_letters(comparisons: list[WorkloadComparison]) -> dict[str, str]:
    labels = dict.fromkeys(row.run.label for group in comparisons for row in group.rows)
    return {label: letter(index) for index, label in enumerate(labels)}


def steady_table(comparisons: list[WorkloadComparison], letters: dict[str, str]) -> PlainTable | None:
    """Every compared case's costs before the steady state (first step, warm-up, compile time or
    first-use cost), when compiling pays off, and a sustained run's burst against sustained
    speed; the columns no case fills are left out."""
    cases = [(letters.get(row.run.label, row.run.label), case) for group in comparisons
             for row in group.rows for case in (row.cpu, row.accel) if case is not None]
    rows = steady_rows(cases)
    if not rows:
        return None
    columns = ("", *STEADY_COLUMNS)
    keep = non_empty_columns(columns, rows)
    return PlainTable("First use and sustained speed", [columns[i] for i in keep],
                      [[row[i] for i in keep] for row in rows], [False] * len(rows))


def comparison_layout(comparisons: list[WorkloadComparison]) -> Layout:
    """Every comparison as plain tables and the notes said once under them."""
    letters, notes = run_letters(comparisons), Footnotes()
    tables: list[PlainTable] = []
    citations: dict[str, None] = {}
    caveats: dict[str, None] = {}
    for group in comparisons:
        rows = [machine_cells(row, group, letters, notes) for row in group.rows]
        rows += [reference_cells(ref) for ref in group.references]
        published = [False] * len(group.rows) + [True] * len(group.references)
        for ref in group.references:
            citations.setdefault(ref.source.citation, None)
            if ref.caveats:
                caveats.setdefault(f"{ref.machine}: {ref.caveats}", None)
        keep = non_empty_columns(COLUMNS, rows)
        labels = list(dict.fromkeys(r.run.label for r in group.rows))
        unit = rate_header(group)
        # The rate columns named by what they count, the unit under the device ("CPU" over
        # "samples/s": a narrow column the verdicts beside it need the width of).
        columns = [f"vs {letters[labels[0]]}" if name == "vs" and len(labels) == 2
                   else name.replace(" rate", f"\n{unit}") if name.endswith(" rate") and unit else name
                   for name in COLUMNS]
        tables.append(PlainTable(f"{group.workload} · {group.mode}", [columns[i] for i in keep],
                                 [[row[i] for i in keep] for row in rows], published))
    steady = steady_table(comparisons, letters)
    if steady is not None:
        tables.append(steady)
    lines = notes.lines()
    lines.append(EPOCH_NOTE)
    if steady is not None:
        lines.append(STEADY_NOTE)
    if any(g.pairs for g in comparisons):
        lines.append(VS_NOTE)
    if any(p.verdict.noisy for g in comparisons for p in g.pairs):
        lines.append(NOISY_NOTE)
    if any(r.speedup_verdict for g in comparisons for r in g.rows):
        lines.append(SPEEDUP_NOTE)
    if any(g.pairs for g in comparisons) or any(r.speedup_verdict for g in comparisons for r in g.rows):
        lines.append(f"verdicts: {RULE_CAPTION}")
    if citations:
        lines.append(f"published rows are {PUBLISHED_LABEL} (sources: {'; '.join(citations)})")
        lines += [f"caveat, {text}" for text in caveats]
    return Layout(tables, lines)


def comparison_renderable(comparisons: list[WorkloadComparison]) -> Group:
    layout = comparison_layout(comparisons)
    parts: list[FittedTable | Text | Prose] = []
    for table in layout.tables:
        right = [name for name in table.columns if name in RIGHT or name.startswith(("CPU\n", "accel.\n"))]
        parts += [FittedTable(table.title, table.columns, table.rows,
                              ["dim italic" if published else "" for published in table.published], right,
                              stack=("", "run")),
                  Text("")]
    parts += [Prose(line, "dim") for line in layout.notes]
    return Group(*parts)


def reference_renderable() -> Group:
    """Every built-in published figure, for ``accelbench compare --reference`` with no runs; each
    source is cited once, under the tables, and marked where it is used."""
    sources = Footnotes()
    epoch_rows = [[ref.workload, ref.mode, ref.machine, f"{ref.memory_gb:g} GB" if ref.memory_gb else "n/a",
                   *(reference_cells(ref)[i] for i in (6, 7, 9, 10)), sources.add(ref.source.citation),
                   ref.caveats]
                  for ref in EPOCH_REFERENCES]
    epoch = FittedTable(f"Epoch times ({PUBLISHED_LABEL})", ("workload", "mode", "machine", "memory",
                        "CPU time", "accelerator", "accelerator time", "speedup", "source", "caveats"),
                        epoch_rows, stack=("workload", "mode"))
    sizes = FittedTable(f"Model sizes ({PUBLISHED_LABEL})", ("model", "parameters",
                        "GMACs (224x224, batch 1)", "source"),
                        [[m.model, f"{m.parameters:,}", f"{m.gmacs:.2f}", sources.add(m.source.citation)]
                         for m in MODEL_SIZES], stack=("model",))
    ratios = FittedTable(f"Stated ratios ({PUBLISHED_LABEL})", ("claim", "ratio", "machine", "workloads",
                         "source", "caveats"),
                         [[r.claim, f"{r.qualifier} {r.ratio:g}x", r.machine, r.workloads,
                           sources.add(r.source.citation), r.caveats] for r in RATIO_CLAIMS],
                        stack=("claim",))
    features = FittedTable(f"Feature findings ({PUBLISHED_LABEL})", ("device", "feature", "status", "detail",
                           "source"),
                           [[f.device, f.feature, f.status, f.detail, sources.add(f.source.citation)]
                            for f in FEATURE_FINDINGS], stack=("device", "feature"))
    spaced: list[FittedTable | Text] = []
    for table in (epoch, sizes, ratios, features):
        spaced += [table, Text("")]
    return Group(*spaced, Text("sources:"), *(Prose(line) for line in sources.lines()))
