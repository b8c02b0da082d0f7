"""Comparison tables in the published style, as plain cells (shared with the HTML report) and rich.

Every cell that holds text from a result is wrapped in ``rich.text.Text`` so that a machine name or
an error text such as "[red]" is shown as written rather than read as rich markup.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from accelbench.compare import MachineRow, Pair, WorkloadComparison, describe
from accelbench.compare.key import config_label
from accelbench.compare.verdict import CANT_TELL, SAME, interval_text
from accelbench.measure.memory import format_bytes
from accelbench.reference.published import (
    EPOCH_REFERENCES,
    FEATURE_FINDINGS,
    MODEL_SIZES,
    PUBLISHED_LABEL,
    RATIO_CLAIMS,
    EpochReference,
)
from accelbench.render.format import format_seconds
from accelbench.results import CaseResult

MACHINE_COLUMNS = ("run", "machine", "memory", "config", "CPU time", "accelerator", "accelerator time",
                   "speedup")
PAIR_COLUMNS = ("A", "B", "device A", "device B", "config", "B vs A", "settings", "power state")
#: How verdicts are reached, for table captions (terminal and HTML).
RULE_CAPTION = ("faster/slower only when the 95% interval of the throughput ratio across worker "
                "processes (--repeat) excludes 1 and the ratio is beyond the +-5% noise band; "
                "same within noise when the interval lies inside it; can't tell otherwise "
                "(fewer than 4 processes a side are never called)")


def epoch_cell(case: CaseResult | None) -> str:
    """Epoch time labelled measured/projected, or the status of a case that did not finish."""
    if case is None:
        return ""
    if not case.ok:
        first = case.error.splitlines()[0][:80] if case.error else ""
        return f"{case.status}: {first}" if first else case.status
    epoch = case.epoch_time()
    if epoch:
        return f"{format_seconds(epoch[0])} ({epoch[3]})"
    rate = case.throughput()
    return f"{rate:,.0f} samples/s (no epoch size)" if rate else "n/a"


def speedup_cell(row: MachineRow) -> str:
    """The speedup with what the rule says about it: "5.02x (95% CI 4.8–5.3, 3 vs 3 processes)"."""
    verdict = row.speedup_verdict
    if verdict is None:
        return ""
    if row.speedup is None:
        return describe(verdict)
    if verdict.verdict == CANT_TELL:
        return f"{row.speedup:.2f}x (can't tell: {interval_text(verdict)})"
    suffix = "same within noise, " if verdict.verdict == SAME else ""
    return f"{row.speedup:.2f}x ({suffix}{interval_text(verdict)})"


def machine_cells(row: MachineRow) -> list[str]:
    accel = row.accel
    accel_name = ""
    if accel is not None:
        accel_name = f"{accel.device} ({accel.device_name})" if accel.device_name else accel.device
    either = row.cpu or accel
    return [row.run.label, row.run.machine, format_bytes(row.run.memory_bytes) if row.run.memory_bytes
            else "n/a", config_label(either) if either else "", epoch_cell(row.cpu), accel_name,
            epoch_cell(accel), speedup_cell(row)]


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
    return [PUBLISHED_LABEL, ref.machine,
            f"{ref.memory_gb:g} GB" if ref.memory_gb else "n/a", "published",
            published_time(ref.cpu_epoch_s),
            ref.accelerator or "", published_time(ref.accel_epoch_s) + (derived if ref.accel_epoch_s else ""),
            f"{speedup:.2f}x" if speedup else ""]


def pair_cells(pair: Pair) -> list[str]:
    return [pair.a_label, pair.b_label, pair.a.device, pair.b.device, config_label(pair.a),
            describe(pair.verdict), f"differs: {pair.settings_note}" if pair.settings_note else "same or n/a",
            f"differs: {pair.power_note}" if pair.power_note else "same or n/a"]


def _table(title: str, columns: tuple[str, ...], rows: list[list[str]], styles: list[str] | None = None,
           caption: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for index, cells in enumerate(rows):
        table.add_row(*(Text(cell) for cell in cells), style=styles[index] if styles else None)
    return table


def comparison_renderable(comparisons: list[WorkloadComparison]) -> Group:
    parts: list[Table] = []
    for group in comparisons:
        rows = [machine_cells(row) for row in group.rows]
        styles = [""] * len(rows)
        rows += [reference_cells(ref) for ref in group.references]
        styles += ["dim italic"] * len(group.references)
        caption = ("epoch times: measured = whole epochs ran; projected = dataset size / batch x mean "
                   "step time")
        if group.references:
            caption += f"; italic rows are {PUBLISHED_LABEL} (sources: "
            caption += ", ".join(dict.fromkeys(ref.source.citation for ref in group.references)) + ")"
        parts.append(_table(f"{group.workload} · {group.mode}", MACHINE_COLUMNS, rows, styles, caption))
        if group.pairs:
            parts.append(_table(f"{group.workload} · {group.mode}: run against run", PAIR_COLUMNS,
                                [pair_cells(p) for p in group.pairs], caption=RULE_CAPTION))
    return Group(*parts)


def reference_renderable() -> Group:
    """Every built-in published figure, for ``accelbench compare --reference`` with no runs."""
    # The listing has no config column (its rows are all published): drop that cell.
    epoch_rows = [[ref.workload, ref.mode, *(cell for index, cell in enumerate(reference_cells(ref))
                                             if index not in (0, 3)), ref.source.citation, ref.caveats]
                  for ref in EPOCH_REFERENCES]
    epoch = _table(f"Epoch times ({PUBLISHED_LABEL})", ("workload", "mode", "machine", "memory",
                   "CPU time", "accelerator", "accelerator time", "speedup", "source", "caveats"),
                   epoch_rows)
    sizes = _table(f"Model sizes ({PUBLISHED_LABEL})", ("model", "parameters", "GMACs (224x224, batch 1)",
                   "source"), [[m.model, f"{m.parameters:,}", f"{m.gmacs:.2f}", m.source.citation]
                               for m in MODEL_SIZES])
    ratios = _table(f"Stated ratios ({PUBLISHED_LABEL})", ("claim", "ratio", "machine", "workloads",
                    "source", "caveats"),
                    [[r.claim, f"{r.qualifier} {r.ratio:g}x", r.machine, r.workloads, r.source.citation,
                      r.caveats] for r in RATIO_CLAIMS])
    features = _table(f"Feature findings ({PUBLISHED_LABEL})", ("device", "feature", "status", "detail",
                      "source"), [[f.device, f.feature, f.status, f.detail, f.source.citation]
                                  for f in FEATURE_FINDINGS])
    return Group(epoch, sizes, ratios, features)
