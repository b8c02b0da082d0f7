"""Matplotlib figures for the HTML report, returned as PNG bytes.

PNG (not SVG) because a bitmap cannot carry markup: whatever a machine name contains, the figure
cannot inject anything into the report. Figures are built on ``matplotlib.figure.Figure`` directly,
not pyplot, so no GUI backend or global state is involved and this works headless.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from accelbench.compare import LabelledRun, WorkloadComparison
from accelbench.reference.published import EpochReference
from accelbench.results import CaseResult, rate_unit
from accelbench.results.sustained import SustainedRecord
from accelbench.store.history import TimelinePoint, parse_time

DPI = 100
_PUBLISHED_COLOUR = "#bbbbbb"
#: A history panel: its axes' height, and a line of legend per series (inches, at DPI).
TIMELINE_AXES_IN = 2.2
LEGEND_LINE_IN = 0.22


def label(text: str) -> str:
    # "$" would switch matplotlib into mathtext (and can raise on odd input): show it literally.
    return text.replace("$", r"\$")


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return buffer.getvalue()


Bar = tuple[str, float, tuple[float, float] | None]


def _protocol_test(case: CaseResult) -> str:
    """A --protocol case's protocol and test ("mlperf-client creative writing", "llama-bench pp512")."""
    section = case.generation.protocol if case.generation else None
    test = section.test if section is not None else None
    return f"{case.protocol} {test}" if test and test != case.protocol else case.protocol


def _compile_words(case: CaseResult) -> str:
    """The compile back end and, where the execution recipe recorded it, its mode."""
    execution = case.generation.execution if case.generation else None
    recorded = execution.compile if execution is not None else None
    if recorded:
        return f"compile {recorded}"
    return f"compile:{case.compile_backend}" if case.compile_backend else "eager"


def _label_parts(run: LabelledRun, case: CaseResult) -> list[str]:
    """Every part a bar's name may need, in the order they are shown."""
    lengths = f"prompt {case.prompt_len} +{case.new_tokens}" if case.new_tokens else ""
    return [run.label, case.device, f"b{case.batch_size}", case.precision, _compile_words(case),
            _protocol_test(case), lengths, "streamed" if case.streamed else ""]


def bar_names(items: Sequence[tuple[LabelledRun, CaseResult]]) -> list[str]:
    """Each bar named by what differs between the bars of one panel (run, device, batch,
    precision, compile mode, protocol and its test or category, prompt and new-token lengths):
    int8 is told from int4 and one MLPerf category from another. A part every bar shares is left
    out, except the run and device, said where nothing else tells the bars apart."""
    parts = [_label_parts(run, case) for run, case in items]
    differ = [index for index in range(len(parts[0]) if parts else 0)
              if len({row[index] for row in parts}) > 1]
    shown = differ or [0, 1]
    return [" ".join(row[index] for index in shown if row[index]) for row in parts]


def throughput_panels(runs: Sequence[LabelledRun]) -> dict[str, list[Bar]]:
    """Bars (label, rate, 95% CI) grouped per workload and mode: one panel each, because one axis
    across MNIST (thousands/s) and the VAE (tens of thousands/s) would hide the smaller. The
    panel's title names its rate's unit (samples/s, or a generation's decode tokens/s); its bars
    are named by what differs between them (``bar_names``)."""
    found: dict[str, list[tuple[LabelledRun, CaseResult, float]]] = {}
    for run in runs:
        for case in run.record.cases:
            rate = case.throughput() if case.ok else None
            if rate:
                found.setdefault(f"{case.workload} {case.mode} ({rate_unit(case.mode)})", []).append(
                    (run, case, rate))
    return {title: [(name, rate, case.throughput_ci()) for name, (_, case, rate)
                    in zip(bar_names([(run, case) for run, case, _ in bars]), bars, strict=True)]
            for title, bars in found.items()}


def _tick(value: float, _position: int) -> str:
    """Thousands separated (200,000), small ticks exact (2.5 stays 2.5, never rounded to 2)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:g}"


def throughput_plot(runs: Sequence[LabelledRun]) -> Figure | None:
    """Horizontal bars with their CI, one panel (own axis, from zero) per workload and mode."""
    panels = throughput_panels(runs)
    if not panels:
        return None
    heights = [0.4 * len(bars) + 0.9 for bars in panels.values()]
    fig = Figure(figsize=(9, sum(heights) + 0.6), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    for ax, (title, bars) in zip(axes, panels.items(), strict=True):
        positions = list(range(len(bars)))
        errors = [[max(rate - ci[0], 0) if ci else 0 for _, rate, ci in bars],
                  [max(ci[1] - rate, 0) if ci else 0 for _, rate, ci in bars]]
        ax.barh(positions, [rate for _, rate, _ in bars], xerr=errors, color="#4c72b0", capsize=3)
        ax.set_yticks(positions, [label(name) for name, _, _ in bars])
        ax.invert_yaxis()
        ax.set_xlim(left=0)
        ax.xaxis.set_major_formatter(FuncFormatter(_tick))
        ax.set_title(label(title), loc="left", fontsize="medium")
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("rate in each panel's unit (median; bars: 95% CI); each panel has its own scale")
    return fig


def throughput_figure(runs: Sequence[LabelledRun]) -> bytes | None:
    fig = throughput_plot(runs)
    return _png(fig) if fig is not None else None


def speedup_figure(comparisons: Sequence[WorkloadComparison]) -> bytes | None:
    """Accelerator-over-CPU speedup per machine row; published rows in grey, hatched."""
    bars: list[tuple[str, float, bool]] = []
    for group in comparisons:
        for row in group.rows:
            if row.speedup and row.accel is not None:
                bars.append((f"{group.workload} {group.mode} | {row.run.label} {row.accel.device}",
                             row.speedup, False))
        for ref in group.references:
            speedup = _reference_speedup(ref)
            if speedup:
                bars.append((f"{group.workload} {group.mode} | {ref.machine} (published)", speedup, True))
    if not bars:
        return None
    fig = Figure(figsize=(9, 0.45 * len(bars) + 1.2))
    ax = fig.add_subplot()
    for index, (_, value, published) in enumerate(bars):
        ax.barh(index, value, color=_PUBLISHED_COLOUR if published else "#55a868",
                hatch="//" if published else None)
    ax.set_yticks(list(range(len(bars))), [label(name) for name, _, _ in bars])
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("speedup over the same machine's CPU (epoch time ratio; 1 = no gain)")
    ax.set_title("Accelerator speedup (grey, hatched: published, not measured here)")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _reference_speedup(ref: EpochReference) -> float | None:
    if ref.speedup:
        return ref.speedup
    if ref.cpu_epoch_s and ref.accel_epoch_s:
        return ref.cpu_epoch_s / ref.accel_epoch_s
    return None


def step_time_figure(runs: Sequence[LabelledRun], workload: str, mode: str) -> bytes | None:
    """Box plot of the raw per-step samples of each run/device, so the spread is visible."""
    drawn = [(run, case) for run in runs for case in run.record.cases
             if case.workload == workload and case.mode == mode and case.ok and case.step_times]
    series = [(name, [t * 1e3 for t in case.step_times])
              for name, (_, case) in zip(bar_names(drawn), drawn, strict=True)]
    if not series:
        return None
    fig = Figure(figsize=(9, 0.5 * len(series) + 1.4))
    ax = fig.add_subplot()
    try:
        ax.boxplot([values for _, values in series], orientation="horizontal", showfliers=True)
    except TypeError:  # matplotlib < 3.10 knows only vert=, which 3.11 deprecates
        ax.boxplot([values for _, values in series], vert=False, showfliers=True)
    ax.set_yticks(list(range(1, len(series) + 1)), [label(name) for name, _ in series])
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds per step (raw samples)")
    ax.set_title(label(f"Step-time distribution: {workload} {mode}"))
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def timeline_plot(points: Sequence[TimelinePoint], workload: str, mode: str) -> Figure | None:
    """Throughput over time, one line per machine, device and configuration; needs two points.

    The axis starts at zero: a 7% wobble between runs on a shared machine, drawn on an axis that
    starts near the data, looks like a cliff. The legend sits below the axes, outside the data
    (inside it hid points), and the figure's height follows its content: the axes a fixed 2.2
    inches, the legend a line per series."""
    lines: dict[str, list[tuple[datetime, float]]] = {}
    for point in points:
        if point.throughput and point.status == "ok":
            # One line per comparability key (point.config), as `history` draws them.
            name = f"{point.machine} {point.device} ({point.config or point.batch_size})"
            lines.setdefault(name, []).append((parse_time(point.created_at), point.throughput))
    if sum(len(values) for values in lines.values()) < 2:
        return None
    fig = Figure(figsize=(9, TIMELINE_AXES_IN + LEGEND_LINE_IN * len(lines) + 0.6), layout="constrained")
    ax = fig.add_subplot()
    for name, values in lines.items():
        times, rates = [t for t, _ in values], [v for _, v in values]
        ax.plot(times, rates, marker="o", label=label(name))  # type: ignore[arg-type]  # datetimes, converted
    ax.set_ylim(bottom=0, top=max(v for values in lines.values() for _, v in values) * 1.15)
    ax.set_ylabel(f"{rate_unit(mode)} (axis from 0)")
    ax.set_title(label(f"History: {workload} {mode}"))
    fig.legend(fontsize="small", loc="outside lower center", ncols=1, frameon=False)
    ax.grid(alpha=0.3)
    for tick in ax.get_xticklabels():
        tick.set_rotation(20)
        tick.set_horizontalalignment("right")
    return fig


def timeline_figure(points: Sequence[TimelinePoint], workload: str, mode: str) -> bytes | None:
    fig = timeline_plot(points, workload, mode)
    return _png(fig) if fig is not None else None


def parity_figure(steps: Sequence[float], candidate: Sequence[float], reference: Sequence[float],
                  title: str, noise_floor: Sequence[float] = (), judged_steps: int | None = None) -> bytes:
    """Both loss curves; with the noise-floor run (dotted) and, where the verdict judged fewer
    steps than were run, the unjudged steps shaded."""
    fig = Figure(figsize=(9, 3.4))
    ax = fig.add_subplot()
    ax.plot(steps, reference, label="reference", color="#4c72b0")
    ax.plot(steps, candidate, label="candidate", color="#dd8452", linestyle="--")
    if len(noise_floor) == len(steps):
        ax.plot(steps, noise_floor, label="noise floor (reference, perturbed)", color="#55a868",
                linestyle=":")
    if judged_steps is not None and steps and judged_steps < len(steps):
        ax.axvspan(judged_steps + 0.5, steps[-1] + 0.5, color="#999999", alpha=0.15,
                   label="not judged (amplified rounding)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(label(title))
    ax.legend()
    ax.grid(alpha=0.3)
    return _png(fig)


def sweep_figure(lines: Sequence[tuple[str, Sequence[tuple[int, float, tuple[float, float] | None]],
                                      int | None]], title: str, x_label: str = "batch size",
                 y_label: str = "samples per second (median step; bars: 95% CI)") -> bytes | None:
    """Throughput against batch size (log2 axis), one line per device and mode with 95% CI bars;
    a star marks where each line saturates. ``lines``: (name, [(batch, rate, ci)], saturation).
    A prompt-length sweep draws decode tokens/s against the prompt the same way."""
    drawn = [(name, points, sat) for name, points, sat in lines if points]
    if not drawn:
        return None
    fig = Figure(figsize=(9, 4))
    ax = fig.add_subplot()
    for name, points, saturation in drawn:
        batches = [b for b, _, _ in points]
        rates = [r for _, r, _ in points]
        errors = [[max(r - ci[0], 0) if ci else 0 for _, r, ci in points],
                  [max(ci[1] - r, 0) if ci else 0 for _, r, ci in points]]
        line = ax.errorbar(batches, rates, yerr=errors, marker="o", capsize=3, label=label(name))
        for batch, rate, _ in points:
            if batch == saturation:
                ax.plot([batch], [rate], marker="*", markersize=16, color=line[0].get_color(),
                        markeredgecolor="black")
    ax.set_xscale("log", base=2)
    tried = sorted({b for _, points, _ in drawn for b, _, _ in points})
    ax.set_xticks(tried, [str(b) for b in tried])  # the batch sizes themselves, not powers of 2
    ax.set_ylim(bottom=0)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(label(title) + (" (star: saturates)" if any(sat for _, _, sat in drawn) else ""))
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return _png(fig)


def sustained_plot(record: SustainedRecord, title: str, per_step: float = 1.0) -> Figure:
    """A sustained run over time: throughput per interval with the burst and sustained parts
    shaded and their means drawn, and under it each sensor that could be read (clock,
    temperature, power), so a throttle and the sensor that moved with it line up."""
    from accelbench.results.sustained import parts

    series, figures = record.series, record.figures
    readable = [(name, sensor) for name, sensor in series.sensors.items() if sensor.readable]
    fig = Figure(figsize=(9, 2.6 + 1.3 * len(readable)), layout="constrained")
    axes = fig.subplots(1 + len(readable), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": [2.2] + [1] * len(readable)})[:, 0]
    ends = series.ends or [float(i + 1) * series.interval_s for i in range(len(series.work))]
    rates = [w / s * per_step if s > 0 else 0.0 for w, s in zip(series.work, series.seconds, strict=True)]
    ax = axes[0]
    ax.plot(ends, rates, marker=".", color="#4c72b0")
    burst, held = parts(series)
    unit = "samples/s" if record.kind == "case" else f"{series.unit}/s"
    for part, value, colour, word in ((burst, figures.burst, "#55a868", "burst"),
                                      (held, figures.sustained, "#c44e52", "sustained")):
        chosen = ends[part]
        if chosen and value is not None:
            start = chosen[0] - series.seconds[part][0]
            ax.axvspan(start, chosen[-1], color=colour, alpha=0.12)
            ax.hlines(value * per_step, start, chosen[-1], colors=colour, linestyles="--",
                      label=f"{word} {value * per_step:,.4g} {unit}")
    ax.set_ylim(bottom=0, top=max(rates, default=1.0) * 1.15 or 1.0)
    ax.set_ylabel(unit)
    ax.yaxis.set_major_formatter(FuncFormatter(_tick))
    ax.set_title(label(f"{title}: {figures.describe()}"), loc="left", fontsize="medium", wrap=True)
    ax.legend(fontsize="small", loc="lower left")
    ax.grid(alpha=0.3)
    for ax, (name, sensor) in zip(axes[1:], readable, strict=True):
        points = [(t, v) for t, v in zip(ends, sensor.values, strict=False) if v is not None]
        ax.plot([t for t, _ in points], [v for _, v in points], marker=".", color="#8172b2")
        if sensor.limit is not None:
            ax.axhline(sensor.limit, color="#c44e52", linestyle=":", label="limit")
            ax.legend(fontsize="small", loc="lower left")
        ax.set_ylabel(name.replace("_", " "))
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("seconds of sustained work (after warm-up)")
    return fig


def sustained_figure(record: SustainedRecord, title: str, per_step: float = 1.0) -> bytes:
    return _png(sustained_plot(record, title, per_step))
