"""The self-contained HTML report: one file, no scripts, no external URLs, works offline.

Safety by construction: markup is built only with ``el()``, which escapes every plain ``str`` it is
given (text and attribute values alike); only ``Markup`` (produced by ``el()`` itself) passes
through unescaped. So a machine name like ``<script>...`` or an error text with ``<img onerror>``
is shown as text. A Content-Security-Policy that allows no scripts and only inline styles and
``data:`` images backs this up, and also guarantees that the report loads nothing from the network.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from accelbench.compare import LabelledRun, WorkloadComparison
from accelbench.parity.shown import judged_label
from accelbench.reference.published import FEATURE_FINDINGS, PUBLISHED_LABEL, RATIO_CLAIMS
from accelbench.render import figures, html_sections
from accelbench.render.compare_table import comparison_layout
from accelbench.render.format import rate_label
from accelbench.render.peak_marks import PEAK_COLUMNS, peak_rows
from accelbench.results import Parity, ProbeCell
from accelbench.store.history import TimelinePoint


class Markup(str):
    """A string that is already safe HTML."""




def _render_children(children: Iterable[Any]) -> str:
    parts = []
    for child in children:
        if child is None:
            continue
        if isinstance(child, Markup):
            parts.append(str(child))
        elif isinstance(child, str):
            parts.append(html.escape(child))
        elif isinstance(child, int | float):
            parts.append(html.escape(str(child)))
        else:
            parts.append(_render_children(child))
    return "".join(parts)


def el(tag: str, *children: Any, **attrs: str | None) -> Markup:
    """``<tag attrs>children</tag>`` with every text and attribute value escaped.

    Attribute names come from this module's code only (``class_`` becomes ``class``)."""
    attributes = "".join(f' {name.rstrip("_").replace("_", "-")}="{html.escape(str(value), quote=True)}"'
                         for name, value in attrs.items() if value is not None)
    if tag in ("img", "meta", "br"):
        return Markup(f"<{tag}{attributes}>")
    return Markup(f"<{tag}{attributes}>{_render_children(children)}</{tag}>")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], row_class: Callable[[int], str | None]
          = lambda index: None, caption: str | None = None) -> Markup:
    body = [el("tr", *(el("td", cell) for cell in row), class_=row_class(index))
            for index, row in enumerate(rows)]
    return el("table", el("caption", caption) if caption else None,
              el("thead", el("tr", *(el("th", h) for h in headers))), el("tbody", *body))


def image(png: bytes | None, alt: str) -> Markup | None:
    if png is None:
        return None
    uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return el("figure", el("img", src=uri, alt=alt), el("figcaption", alt))


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;
padding:0 1em;color:#222}
h1{margin-bottom:.2em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}caption{text-align:left;font-weight:600;padding:.3em 0}
tr.published td{font-style:italic;color:#666;background:#fafafa}
figure{margin:1em 0}img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}.note{color:#555;font-size:.9em}
td.works{background:#dff0d8}td.fails,td.wrong{background:#f2dede}td.slower{background:#fcf8e3}
code{background:#f5f5f5;padding:0 .2em}div.machine{display:inline-block;vertical-align:top;margin-right:1.5em}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _environment_section(runs: Sequence[LabelledRun]) -> list[Markup]:
    """Each machine's facts once (not once per run), then one line per run."""
    parts = [el("div", table(("fact", "value"), rows, caption=machine), class_="machine")
             for machine, rows in html_sections.environments_by_machine(runs).items()]
    parts.append(table(("run", "kind", "created", "machine", "command"), html_sections.run_rows(runs),
                       caption="Runs in this report"))
    return parts


def _diagnosis_section(runs: Sequence[LabelledRun]) -> list[Markup]:
    rows = html_sections.diagnosis_rows(runs)
    if not rows:
        return []
    return [table(html_sections.DIAGNOSIS_COLUMNS, rows,
                  caption="Bottleneck diagnosis of profiled cases (--profile): launch-bound = device "
                          "idle between many short kernels; compute-/memory-bound = near the measured "
                          "FLOP/s or bandwidth ceiling; input-bound = waiting for data; kernel-bound = "
                          "busy but below both ceilings")]


def _peak_section(runs: Sequence[LabelledRun]) -> list[Markup]:
    rows = [(run.label, *row) for run in runs for row in peak_rows(run.record.cases)]
    if not rows:
        return []
    return [table(("run", *PEAK_COLUMNS), rows,
                  caption="Achieved FLOP/s and its share of the measured matrix-product peak of the "
                          "case's precision; the peak's mark says when that peak was capped (a "
                          "slowdown held the clock while it was timed), busy (measured beside other "
                          "work) or re-checked on a busy machine")]


def _memory_section(runs: Sequence[LabelledRun]) -> list[Markup]:
    rows = html_sections.memory_rows(runs)
    if not rows:
        return []
    return [table(html_sections.MEMORY_COLUMNS, rows,
                  caption="Peak memory of each case, and what it counts: RSS = the whole process's "
                          "peak resident memory (the CPU); allocator = the device allocator's peak of "
                          "live tensors; sampled = live tensors sampled now and then (a lower bound, "
                          "marked ≥)")]


def _comparison_section(comparisons: Sequence[WorkloadComparison]) -> list[Markup]:
    """One table per workload and mode (the terminal's layout), the notes once after them all."""
    layout = comparison_layout(list(comparisons))
    parts: list[Markup] = []
    for plain in layout.tables:
        parts.append(el("h3", plain.title))
        parts.append(table(plain.columns, plain.rows,
                           row_class=lambda i, flags=plain.published: "published" if flags[i] else None))
    parts.append(el("ul", *(el("li", line) for line in layout.notes), class_="note"))
    return parts


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


def _parity_section(runs: Sequence[LabelledRun]) -> list[Markup]:
    parts: list[Markup] = []
    for run in runs:
        for case in run.record.cases:
            parity = case.parity
            if parity is None:
                continue
            title = f"{run.label}: {case.workload} {case.mode} on {case.device} ({case.precision})"
            verdict = _parity_verdict(parity)
            steps, candidate, reference = (_numbers(s) for s in (parity.steps, parity.candidate,
                                                                 parity.reference))
            if not (steps or candidate or reference):
                parts.append(el("p", el("strong", title), f": {verdict} (no loss curves)"))
                continue
            if not steps or len({len(steps), len(candidate), len(reference)}) != 1:
                parts.append(el("p", f"{title}: parity data is malformed and was not drawn", class_="note"))
                continue
            parts.append(image(figures.parity_figure(steps, candidate, reference, title,
                                                     _numbers(parity.noise_floor), parity.judged_steps),
                               f"Parity loss curves, {title}"))
            diffs = [abs(c - r) for c, r in zip(candidate, reference, strict=True)]
            worst = max((d for d in diffs if not math.isnan(d)), default=math.nan)
            nan_steps = [s for s, c in zip(steps, candidate, strict=True) if not math.isfinite(c)]
            note = f"largest |candidate - reference|: {worst:.3g}"
            if nan_steps:
                note += f"; candidate loss is NaN from step {nan_steps[0]:g}"
            parts.append(el("p", "; ".join(filter(None, (verdict, note))), class_="note"))
    return parts


def _feature_section(runs: Sequence[LabelledRun]) -> list[Markup]:
    columns: list[tuple[str, dict[str, ProbeCell]]] = [
        (f"{run.machine or run.label} {probe.device}", probe.cells)
        for run in runs for probe in run.record.probes if probe.cells]
    if not columns:
        return []
    features = list(dict.fromkeys(f for _, cells in columns for f in cells))
    head = el("tr", el("th", "feature"), *(el("th", name) for name, _ in columns))
    body = []
    for feature in features:
        cells = []
        for _, probe in columns:
            cell = probe.get(feature)
            if cell is None:
                cells.append(el("td", "not probed"))
            else:
                cells.append(el("td", el("strong", cell.status), el("br") if cell.detail else None,
                                el("span", cell.detail, class_="note"), class_=cell.status,
                                title=cell.detail))
        body.append(el("tr", el("td", feature), *cells))
    return [el("table", el("caption", "Feature probes per device"), el("thead", head), el("tbody", *body))]


def _sweep_section(runs: Sequence[LabelledRun]) -> list[Markup]:
    """Each batch-size sweep: its figure, the saturation and crossover sentences, its table."""
    from accelbench.render.generation_sweep import (
        PROMPT_COLUMNS,
        PROMPT_SWEEP_NOTE,
        is_prompt_sweep,
        prompt_figure_lines,
        prompt_sweep_lines,
        prompt_sweep_rows,
    )
    from accelbench.render.sweep_table import columns, definition, figure_lines, summary_lines, sweep_rows

    parts: list[Markup] = []
    for run in runs:
        if run.record.kind != "sweep":
            continue
        title = f"{run.label} on {run.machine or 'unknown machine'}"
        parts.append(el("h3", f"Sweep {title}"))
        if is_prompt_sweep(run.record):
            parts += [image(figures.sweep_figure(prompt_figure_lines(run.record),
                                                 f"Prompt-length sweep, {title}", "prompt tokens",
                                                 "decode tokens per second (per sequence)"),
                            f"Decode speed against prompt length, {title}"),
                      el("ul", *(el("li", line) for line in prompt_sweep_lines(run.record))),
                      el("p", PROMPT_SWEEP_NOTE, class_="note"),
                      table(PROMPT_COLUMNS, prompt_sweep_rows(run.record),
                            caption=f"Every prompt length, {title}")]
            continue
        parts.append(image(figures.sweep_figure(figure_lines(run.record), f"Batch-size sweep, {title}",
                                                y_label=f"{rate_label(run.record.cases)} "
                                                        "(median step; bars: 95% CI)"),
                           f"Throughput against batch size, {title}"))
        parts.append(el("ul", *(el("li", line) for line in summary_lines(run.record))))
        parts.append(el("p", definition(), class_="note"))
        parts.append(table(columns(run.record), sweep_rows(run.record), caption=f"Every batch size, {title}"))
    return [p for p in parts if p is not None]


def _published_section() -> list[Markup]:
    """Published findings that are not per-workload tables: stated ratios and feature findings."""
    ratios = table(("claim", "ratio", "machine", "workloads", "source", "caveats"),
                   [(r.claim, f"{r.qualifier} {r.ratio:g}x", r.machine, r.workloads, r.source.citation,
                     r.caveats) for r in RATIO_CLAIMS], row_class=lambda index: "published",
                   caption=f"Stated speed ratios ({PUBLISHED_LABEL})")
    findings = table(("device", "feature", "status", "detail", "source"),
                     [(f.device, f.feature, f.status, f.detail, f.source.citation) for f in FEATURE_FINDINGS],
                     row_class=lambda index: "published",
                     caption=f"Feature findings ({PUBLISHED_LABEL})")
    return [ratios, findings]


def _generation_section(runs: Sequence[LabelledRun]) -> list[Markup]:
    rows = html_sections.generation_rows(runs)
    if not rows:
        return []
    return [table(html_sections.GENERATION_COLUMNS, rows,
                  caption="Greedy decoding with a key/value cache: time to first token (prefill and "
                          "the first token), prefill and decode tokens/s (per sequence; total = all "
                          "sequences), inter-token latency, and the bytes a decode step reads as a "
                          "share of the bandwidth accelbench roofline measured; rows of one device "
                          "run down the prompt length, so decode speed reads against context")]


def _sustained_section(runs: Sequence[LabelledRun]) -> list[Markup]:
    """Each --sustained case over time (throughput and the sensors), with its verdict; the
    first-use costs and break-even are in the results' "First use and sustained speed" table."""
    parts: list[Markup] = []
    for run in runs:
        for case in run.record.cases:
            record = case.sustained_record()
            if record is None:
                continue
            name = f"{case.workload} {case.mode} {case.device} ({run.label}, batch {case.batch_size})"
            png = figures.sustained_figure(record, name, case.batch_size)
            parts.append(image(png, f"Sustained run: {name}: {record.figures.describe()}"))
    if parts:
        parts.append(el("p", "Burst: the first fifth of the run (at most its first minute); "
                             "sustained: the last half; throttles only when the ratio's 95% "
                             "interval lies wholly below the -5% noise band, holds when it lies "
                             "wholly above its edge, can't tell otherwise. A cause is named when a "
                             "sensor moved with it (clock down, temperature at its limit, power "
                             "capped); \"cause not visible\" when none did or none could be read.",
                        class_="note"))
    return [part for part in parts if part is not None]


def render_report(runs: Sequence[LabelledRun], comparisons: Sequence[WorkloadComparison],
                  timelines: dict[tuple[str, str], list[TimelinePoint]] | None = None,
                  title: str = "accelbench report", generated_at: str = "", published: bool = False) -> str:
    """The whole report as one HTML string (pure: no I/O beyond drawing figures in memory).

    Order: the answer first (the machine tables with speedups and verdicts, and why: the diagnosis
    of profiled cases), then the figures, history, parity and features, then the environments,
    once per machine, and the published results."""
    sections: list[Markup] = [el("h1", title),
                              el("p", f"{len(runs)} run(s); generated {generated_at}", class_="note")]
    measured = [g for g in comparisons if g.rows]
    if measured:
        sections += [el("h2", "Results: machines, speedups and verdicts"), *_comparison_section(measured)]
    diagnosis = _diagnosis_section(runs)
    if diagnosis:
        sections += [el("h2", "Why: bottleneck diagnosis"), *diagnosis]
    generation = _generation_section(runs)
    if generation:
        sections += [el("h2", "Generation: time to first token and tokens/s"), *generation]
    held = _sustained_section(runs)
    if held:
        sections += [el("h2", "Before the steady state, and over minutes"), *held]
    peaks = _peak_section(runs)
    if peaks:
        sections += [el("h2", "FLOP/s against the measured peak"), *peaks]
    memory = _memory_section(runs)
    if memory:
        sections += [el("h2", "Peak memory and where it comes from"), *memory]
    timed = [run for run in runs if run.record.kind == "run"]
    pictures = [image(figures.throughput_figure(timed), "Throughput, one panel per workload and mode"),
                image(figures.speedup_figure(comparisons), "Accelerator speedup over CPU")]
    pictures += [image(figures.step_time_figure(timed, g.workload, g.mode),
                       f"Step-time distribution, {g.workload} {g.mode}") for g in measured]
    pictures = [p for p in pictures if p is not None]
    if pictures:
        sections += [el("h2", "Figures"), *pictures]
    sweeps = _sweep_section(runs)
    if sweeps:
        sections += [el("h2", "Batch-size sweeps: saturation and crossover"), *sweeps]
    history = [image(figures.timeline_figure(points, workload, mode), f"History of {workload} {mode}")
               for (workload, mode), points in (timelines or {}).items()]
    history = [h for h in history if h is not None]
    if history:
        sections += [el("h2", "History"), *history]
    parity = _parity_section(runs)
    if parity:
        sections += [el("h2", "Parity: loss curves, candidate against reference"), *parity]
    features = _feature_section(runs)
    if features:
        sections += [el("h2", "Feature matrix"), *features]
    sections += [el("h2", "Environment (once per machine)"), *_environment_section(runs)]
    if published:
        sections += [el("h2", "Published results (not measured here)"), *_published_section()]
    head = el("head", el("meta", charset="utf-8"),
              el("meta", http_equiv="Content-Security-Policy", content=CSP),
              el("meta", name="viewport", content="width=device-width, initial-scale=1"),
              el("title", title), el("style", Markup(STYLE)))
    return "<!doctype html>\n" + el("html", head, el("body", *sections), lang="en") + "\n"
