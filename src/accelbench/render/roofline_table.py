"""The roofline of each device as a terminal table (a pure function of Roofline records)."""

from __future__ import annotations

import math
from typing import Any

from accelbench.measure.ceilings.peak_clocks import BURST_IDLE_S, BURST_REPEATS, capped_text
from accelbench.measure.ceilings.roofline import Roofline
from accelbench.render.fit import FittedTable
from accelbench.render.format import format_bytes_rate, format_seconds
from accelbench.results.sustained import SustainedRecord


def _flops(value: float) -> str:
    return f"{value / 1e9:,.1f} GFLOP/s" if value < 1e12 else f"{value / 1e12:,.1f} TFLOP/s"


def roofline_rows(roofline: Roofline) -> list[tuple[str, str, str]]:
    """(figure, value, how it was measured or why it is missing) for one device."""
    method, errors = roofline.method, roofline.errors
    rows = []
    for name in ("fp32", "tf32", "bf16", "fp16"):
        if name in roofline.matmul_flops:
            how = method.get(f"matmul_{name}", {})
            rows.append((f"matmul {name}" + (" (capped)" if how.get("limited_by") else ""),
                         _flops(roofline.matmul_flops[name]), _matmul_how(how)))
            if isinstance(how.get("burst_flops"), int | float):
                rows.append((f"matmul {name} burst", _flops(how["burst_flops"]),
                             f"short burst beside it: the best of {BURST_REPEATS} single "
                             f"{how.get('matrix_side')}² products, each after "
                             f"{BURST_IDLE_S:g} s idle"))
        elif f"matmul_{name}" in errors:
            rows.append((f"matmul {name}", "n/a", errors[f"matmul_{name}"]))
    bandwidth = roofline.memory_bandwidth_bytes_per_s
    copies = method.get("bandwidth_copies_per_sync")  # absent in rooflines measured before it
    rows.append(("memory bandwidth", "n/a" if math.isnan(bandwidth) else format_bytes_rate(bandwidth),
                 errors.get("memory_bandwidth") or
                 f"copy of {method.get('bandwidth_buffer_bytes', 0) / 2**20:.0f} MiB (read + write)"
                 + (f", {copies} a sync" if copies else "")))
    latency = roofline.launch_latency_s
    rows.append(("launch latency", "n/a" if math.isnan(latency) else format_seconds(latency),
                 errors.get("launch_latency") or
                 f"{method.get('launches')} one-element adds back to back"))
    rows += sustained_rows(roofline)
    for direction, figures in (("h2d", roofline.h2d_bytes_per_s), ("d2h", roofline.d2h_bytes_per_s)):
        if direction in errors:
            rows.append((direction, "n/a", errors[direction]))
            continue
        for kind in ("pinned", "pageable"):
            value = figures.get(kind)
            rows.append((f"{direction} {kind}", "n/a" if value is None else format_bytes_rate(value),
                         errors.get(f"{direction}_{kind}") or
                         f"{method.get('transfer_bytes', 0) / 2**20:.0f} MiB copies"))
    return rows


def _matmul_how(how: dict[str, Any]) -> str:
    """How a matmul figure was timed, what held the clock back then (NVML's slowdown reasons:
    the figure is capped) and whether it was measured beside other work."""
    text = f"{how.get('matrix_side')}² products, {how.get('products_per_sync')} a sync"
    if how.get("limited_by"):
        text += f"; {capped_text(how)} while timed"
    elif isinstance(how.get("clock_mhz"), int | float):
        text += f"; {how['clock_mhz']:,.0f} MHz, no slowdown reported"
    if how.get("busy"):
        text += f"; measured beside other work ({how['busy']}): re-measured when quiet"
    return text


def sustained_rows(roofline: Roofline) -> list[tuple[str, str, str]]:
    """``roofline --sustained``'s held peaks: the sustained rate, its share of the burst figure
    the roofline stores (shown beside it), then the run's own verdict, which compares with the
    run's own first intervals (named, with their rate), and how long it was held."""
    rows = []
    for figure, data in sorted(roofline.sustained.items()):
        record = SustainedRecord.from_dict(data)
        figures, series = record.figures, record.series

        def rate(value: float | None, unit: str = figures.unit) -> str:
            return "n/a" if value is None else (_flops(value) if unit == "FLOP"
                                                else format_bytes_rate(value))

        stored = ("no stored burst figure to compare with" if record.share_of_stored_burst is None
                  else f"{record.share_of_stored_burst:.0%} of the stored burst "
                       f"{rate(record.stored_burst)}")
        own = figures.describe(rate(figures.burst) if figures.burst is not None else "")
        rows.append((f"sustained {figure.replace('_', ' ')}", rate(figures.sustained),
                     f"{stored}; {own}; held {series.duration_s / 60:g} min in "
                     f"{series.interval_s:g} s intervals"))
    return rows


def roofline_table(roofline: Roofline) -> FittedTable:
    return FittedTable(f"roofline of {roofline.device} ({roofline.device_name}), best figures "
                       f"seen, measured {roofline.measured_at}", ("figure", "value", "how / why n/a"),
                       [list(row) for row in roofline_rows(roofline)], right=("value",),
                       whole=("value",), stack=("figure",))
