"""The self-contained HTML report: one file, no scripts, no external URLs, works offline.

This module gathers what the report shows (rows of plain strings, figures as PNG data URIs) and
``templates/report.html.j2`` lays it out (``render/templating.py``: Jinja2 with autoescape, so a
machine name like ``<script>...`` or an error text with ``<img onerror>`` is shown as text). A
Content-Security-Policy that allows no scripts and only inline styles and ``data:`` images backs
this up, and also guarantees that the report loads nothing from the network.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from typing import Any

from accelbench.compare import LabelledRun, WorkloadComparison
from accelbench.parity.shown import judged_label
from accelbench.reference.published import FEATURE_FINDINGS, PUBLISHED_LABEL, RATIO_CLAIMS
from accelbench.render import figures, html_sections
from accelbench.render.compare_table import comparison_layout
from accelbench.render.format import rate_label
from accelbench.render.generation_detail import OVERALL_COLUMNS, overall_rows
from accelbench.render.peak_marks import PEAK_COLUMNS, peak_rows
from accelbench.results import Parity, ProbeCell
from accelbench.store.history import TimelinePoint

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
#: A figure as the template draws it: its PNG as a data URI, and the words under it.
Figure = dict[str, str]


def image(png: bytes | None, alt: str) -> Figure | None:
    if png is None:
        return None
    return {"uri": "data:image/png;base64," + base64.b64encode(png).decode("ascii"), "alt": alt}


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> dict[str, Any] | None:
    return {"columns": columns, "rows": rows} if rows else None


def _comparison(comparisons: Sequence[WorkloadComparison]) -> dict[str, Any] | None:
    """One table per workload and mode (the terminal's layout), the notes once after them all."""
    measured = [g for g in comparisons if g.rows]
    if not measured:
        return None
    layout = comparison_layout(measured)
    return {"tables": [{"title": plain.title, "columns": plain.columns, "rows": plain.rows,
                        "row_classes": ["published" if flag else None for flag in plain.published]}
                       for plain in layout.tables],
            "notes": layout.notes}


def _numbers(values: Sequence[float | None]) -> list[float]:
    # Stored JSON turns NaN into null: draw it as a gap.
    return [math.nan if value is None else float(value) for value in values]


def _parity_verdict(parity: Parity) -> str:
    """The check's own verdict line: verdict, first bad step, worst difference, error."""
    parts = [f"verdict: {parity.verdict}"]
    if judged_label(parity):
        parts.append(f"judged steps 1-{parity.judged_steps} of {len(parity.steps)} (later steps "
                     "amplify rounding beyond the pass tolerance)")
    if parity.first_bad_step is not None:
        parts.append(f"first bad step {parity.first_bad_step}")
    if parity.max_rel_loss_diff is not None:
        parts.append(f"max relative loss difference {parity.max_rel_loss_diff:.3g}")
    if parity.bad_tensor:
        parts.append(f"bad tensor: {parity.bad_tensor}")
    if parity.error:
        parts.append(f"error: {parity.error}")
    return "; ".join(parts)


def _parity_section(runs: Sequence[LabelledRun]) -> list[dict[str, Any]]:
    """Each parity check: its loss curves and a note, its verdict where it drew no curves, or a
    word that its data was malformed."""
    checks: list[dict[str, Any]] = []
    for run in runs:
        for case in run.record.cases:
            parity = case.parity
            if parity is None:
                continue
            title = f"{run.label}: {case.workload} {case.mode} on {case.device} ({case.precision})"
            verdict = _parity_verdict(parity)
            steps, candidate, reference = (_numbers(s) for s in (parity.steps, parity.candidate,
                                                                 parity.reference))
            check = {"title": title, "verdict": verdict, "figure": None, "note": "", "malformed": False}
            if not (steps or candidate or reference):
                checks.append(check)
                continue
            if not steps or len({len(steps), len(candidate), len(reference)}) != 1:
                checks.append({**check, "malformed": True})
                continue
            figure = image(figures.parity_figure(steps, candidate, reference, title,
                                                 _numbers(parity.noise_floor), parity.judged_steps),
                           f"Parity loss curves, {title}")
            diffs = [abs(c - r) for c, r in zip(candidate, reference, strict=True)]
            worst = max((d for d in diffs if not math.isnan(d)), default=math.nan)
            nan_steps = [s for s, c in zip(steps, candidate, strict=True) if not math.isfinite(c)]
            note = f"largest |candidate - reference|: {worst:.3g}"
            if nan_steps:
                note += f"; candidate loss is NaN from step {nan_steps[0]:g}"
            checks.append({**check, "figure": figure, "note": f"{verdict}; {note}"})
    return checks


def _feature_section(runs: Sequence[LabelledRun]) -> dict[str, Any] | None:
    """Every probed feature against every probed device: its cell (status and detail), or None
    where that device did not probe it."""
    columns: list[tuple[str, dict[str, ProbeCell]]] = [
        (f"{run.machine or run.label} {probe.device}", probe.cells)
        for run in runs for probe in run.record.probes if probe.cells]
    if not columns:
        return None
    features = list(dict.fromkeys(f for _, cells in columns for f in cells))
    return {"columns": [name for name, _ in columns],
            "rows": [(feature, [cells.get(feature) for _, cells in columns]) for feature in features]}


def _sweep_section(runs: Sequence[LabelledRun]) -> list[dict[str, Any]]:
    """Each sweep: its figure, the saturation and crossover sentences (or a prompt sweep's), the
    definition of its figures, its table."""
    from accelbench.render.generation_sweep import (
        PROMPT_COLUMNS,
        PROMPT_SWEEP_NOTE,
        is_prompt_sweep,
        prompt_figure_lines,
        prompt_sweep_lines,
        prompt_sweep_rows,
    )
    from accelbench.render.sweep_table import columns, definition, figure_lines, summary_lines, sweep_rows

    sweeps: list[dict[str, Any]] = []
    for run in runs:
        if run.record.kind != "sweep":
            continue
        title = f"{run.label} on {run.machine or 'unknown machine'}"
        if is_prompt_sweep(run.record):
            sweeps.append({
                "title": title,
                "figure": image(figures.sweep_figure(prompt_figure_lines(run.record),
                                                     f"Prompt-length sweep, {title}", "prompt tokens",
                                                     "decode tokens per second (per sequence)"),
                                f"Decode speed against prompt length, {title}"),
                "lines": prompt_sweep_lines(run.record), "note": PROMPT_SWEEP_NOTE,
                "columns": PROMPT_COLUMNS, "rows": prompt_sweep_rows(run.record),
                "caption": f"Every prompt length, {title}"})
            continue
        sweeps.append({
            "title": title,
            "figure": image(figures.sweep_figure(figure_lines(run.record), f"Batch-size sweep, {title}",
                                                 y_label=f"{rate_label(run.record.cases)} "
                                                         "(median step; bars: 95% CI)"),
                            f"Throughput against batch size, {title}"),
            "lines": summary_lines(run.record), "note": definition(),
            "columns": columns(run.record), "rows": sweep_rows(run.record),
            "caption": f"Every batch size, {title}"})
    return sweeps


def _published_section() -> dict[str, Any]:
    """Published findings that are not per-workload tables: stated ratios and feature findings."""
    ratios = [(r.claim, f"{r.qualifier} {r.ratio:g}x", r.machine, r.workloads, r.source.citation, r.caveats)
              for r in RATIO_CLAIMS]
    findings = [(f.device, f.feature, f.status, f.detail, f.source.citation) for f in FEATURE_FINDINGS]
    return {"label": PUBLISHED_LABEL, "ratios": ratios, "ratio_classes": ["published"] * len(ratios),
            "findings": findings, "finding_classes": ["published"] * len(findings)}


def _sustained_section(runs: Sequence[LabelledRun]) -> list[Figure]:
    """Each --sustained case over time (throughput and the sensors), with its verdict; the
    first-use costs and break-even are in the results' "First use and sustained speed" table."""
    drawn: list[Figure | None] = []
    for run in runs:
        for case in run.record.cases:
            record = case.sustained
            if record is None:
                continue
            name = f"{case.workload} {case.mode} {case.device} ({run.label}, batch {case.batch_size})"
            png = figures.sustained_figure(record, name, case.batch_size)
            drawn.append(image(png, f"Sustained run: {name}: {record.figures.describe()}"))
    return [figure for figure in drawn if figure is not None]


def _pictures(runs: Sequence[LabelledRun], comparisons: Sequence[WorkloadComparison]) -> list[Figure]:
    """Throughput, speedup and each workload's step-time distribution."""
    timed = [run for run in runs if run.record.kind == "run"]
    pictures = [image(figures.throughput_figure(timed), "Throughput, one panel per workload and mode"),
                image(figures.speedup_figure(comparisons), "Accelerator speedup over CPU")]
    pictures += [image(figures.step_time_figure(timed, g.workload, g.mode),
                       f"Step-time distribution, {g.workload} {g.mode}") for g in comparisons if g.rows]
    return [p for p in pictures if p is not None]


def render_report(runs: Sequence[LabelledRun], comparisons: Sequence[WorkloadComparison],
                  timelines: dict[tuple[str, str], list[TimelinePoint]] | None = None,
                  title: str = "accelbench report", generated_at: str = "", published: bool = False) -> str:
    """The whole report as one HTML string (pure: no I/O beyond drawing figures in memory).

    Order: the answer first (the machine tables with speedups and verdicts, and why: the diagnosis
    of profiled cases), then the figures, history, parity and features, then the environments,
    once per machine, and the published results."""
    from accelbench.render.templating import render

    history = [image(figures.timeline_figure(points, workload, mode), f"History of {workload} {mode}")
               for (workload, mode), points in (timelines or {}).items()]
    return render(
        "report.html.j2", title=title, csp=CSP, run_count=len(runs), generated_at=generated_at,
        comparison=_comparison(comparisons),
        diagnosis=_table(html_sections.DIAGNOSIS_COLUMNS, html_sections.diagnosis_rows(runs)),
        generation=_table(html_sections.GENERATION_COLUMNS, html_sections.generation_rows(runs)),
        # Figures across cases (MLPerf Client's overall), as each run stores them: compare's table.
        overall=_table(OVERALL_COLUMNS, overall_rows([(run.label, run.record) for run in runs])),
        sustained=_sustained_section(runs),
        peaks=_table(("run", *PEAK_COLUMNS),
                     [(run.label, *row) for run in runs for row in peak_rows(run.record.cases)]),
        memory=_table(html_sections.MEMORY_COLUMNS, html_sections.memory_rows(runs)),
        pictures=_pictures(runs, comparisons), sweeps=_sweep_section(runs),
        history=[h for h in history if h is not None], parity=_parity_section(runs),
        features=_feature_section(runs),
        machines=list(html_sections.environments_by_machine(runs).items()),
        run_rows=html_sections.run_rows(runs), published=_published_section() if published else None) + "\n"
