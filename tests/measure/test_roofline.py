"""``device_roofline`` and ``accelbench roofline``: the ceilings of a device, measured, cached per
device beside the peak, best figures kept (issue 13)."""

from __future__ import annotations

import json
import math

import pytest
from fakes import FakeAsyncAdapter

from accelbench.devices import Device, DeviceSet, contention
from accelbench.devices.numerics import get_precision
from accelbench.engine.case import Case, skeleton_result
from accelbench.engine.measure_case import achieved_flops
from accelbench.measure.ceilings import bandwidth, peak, roofline
from accelbench.measure.ceilings.roofline import Roofline, device_roofline, merge_best
from accelbench.options import RunOptions


@pytest.fixture
def cpu() -> Device:
    return DeviceSet.current().select("cpu")[0]


@pytest.fixture
def small(tmp_path, monkeypatch):
    """Tiny buffers and products, and a cache of this test's own."""
    monkeypatch.setenv("ACCELBENCH_PEAK_CACHE", str(tmp_path / "peak.json"))
    monkeypatch.setattr(bandwidth, "BANDWIDTH_BUFFER_BYTES", 4 * 2**20)
    monkeypatch.setattr(bandwidth, "TRANSFER_BYTES", 2**20)
    monkeypatch.setattr(bandwidth, "LAUNCHES", 50)
    monkeypatch.setattr(bandwidth, "REPEATS", 2)
    monkeypatch.setattr(bandwidth, "MIN_WINDOW_S", 0.005)
    monkeypatch.setattr(peak, "MIN_SIDE", 32)
    monkeypatch.setattr(peak, "CPU_MAX_SIDE", 64)
    monkeypatch.setattr(peak, "MIN_REPEAT_S", 0.002)
    monkeypatch.setattr(peak, "REPEATS", 1)
    return tmp_path


def test_the_cpu_roofline_is_measured_then_cached(cpu, small, monkeypatch) -> None:
    first = device_roofline(cpu)
    assert set(first.matmul_flops) == {"fp32", "tf32", "bf16", "fp16"}
    assert all(value > 0 for value in first.matmul_flops.values())
    assert first.flops_for("amp-bf16") == first.matmul_flops["bf16"]
    assert first.memory_bandwidth_bytes_per_s > 0 and 0 < first.launch_latency_s < 0.01
    assert first.method["bandwidth_buffer_bytes"] == 4 * 2**20
    # the CPU is the host: no transfer figures, and the reason is given
    assert first.h2d_bytes_per_s == {} == first.d2h_bytes_per_s
    assert "CPU is the host" in first.errors["h2d"]
    # matmul figures are the peak cache's, so % peak and the roofline agree
    assert first.matmul_flops["fp32"] == peak.measured_peak_flops(cpu, "fp32")
    stored = json.loads((small / "roofline.json").read_text())
    assert list(stored["entries"].values())[0]["memory_bandwidth_bytes_per_s"] == \
        first.memory_bandwidth_bytes_per_s

    def must_not_measure(*args, **kwargs):
        raise AssertionError("a cached roofline must not be measured again")

    monkeypatch.setattr(roofline, "measure_roofline", must_not_measure)
    assert device_roofline(cpu) == first


def test_an_amp_case_and_the_roofline_read_one_peak(cpu, small) -> None:
    """Item 5: the amp peak is its autocast dtype's pure product, the figure the roofline shows
    for it; and they stay one figure after a case's re-check raises the peak."""
    measured = device_roofline(cpu)
    amp = _case_figures(cpu, "amp-bf16")
    assert amp["peak_flops"] == measured.flops_for("amp-bf16") == measured.matmul_flops["bf16"]
    raised = 2 * measured.matmul_flops["bf16"]  # as a later, quieter re-check would find it
    peak.record_measurement(cpu, "bf16", peak.MatmulTiming(raised, 64, 4, 2))
    assert device_roofline(cpu).flops_for("amp-bf16") == raised
    assert _case_figures(cpu, "amp-bf16")["peak_flops"] == raised
    how = device_roofline(cpu).method["matmul_bf16"]
    assert (how["matrix_side"], how["products_per_sync"]) == (64, 4)


def _case_figures(device: Device, precision: str) -> dict:
    """What the runner stores in a finished case's ``flops`` (mnist, batch 8, 10,000 s steps:
    5.7e4 FLOP/s, far below any peak, so it never has the peak measured again; at 10 s steps it
    beat a 64² bf16 peak that a busy machine read at 3.3e7 and had it measured again)."""
    result = skeleton_result(Case(workload="mnist", mode="train", device=device, batch_size=8,
                                  precision=precision), RunOptions(size="tiny"))
    result.step_times = [1e4] * 5
    return achieved_flops(result, device, get_precision(precision))


def _figures(device: str, flops: float, bandwidth_: float, latency: float) -> Roofline:
    return Roofline(device, "x", {"fp32": flops}, bandwidth_, latency, {"pinned": bandwidth_},
                    {}, "2026-01-01T00:00:00+00:00")


def test_a_worse_measurement_never_replaces_a_better_one() -> None:
    good = _figures("cpu", 180e9, 20e9, 5e-6)
    busy = _figures("cpu", 107e9, 9e9, 9e-6)
    merged = merge_best(busy, good)
    assert merged.matmul_flops["fp32"] == 180e9
    assert merged.memory_bandwidth_bytes_per_s == 20e9 and merged.launch_latency_s == 5e-6
    assert merged.h2d_bytes_per_s == {"pinned": 20e9}
    nan = _figures("cpu", 190e9, float("nan"), 4e-6)
    merged = merge_best(nan, good)
    assert merged.matmul_flops["fp32"] == 190e9 and merged.memory_bandwidth_bytes_per_s == 20e9


def test_refresh_replaces_the_cached_figures(cpu, small, monkeypatch) -> None:
    monkeypatch.setattr(roofline, "measure_roofline",
                        lambda device, **kw: _figures(device.name, 1e9, 2e9, 1e-5))
    device_roofline(cpu)
    monkeypatch.setattr(roofline, "measure_roofline",
                        lambda device, **kw: _figures(device.name, 5e8, 1e9, 2e-5))
    assert device_roofline(cpu).memory_bandwidth_bytes_per_s == 2e9  # cached
    assert device_roofline(cpu, refresh=True).memory_bandwidth_bytes_per_s == 1e9


class PageableOnly(FakeAsyncAdapter):
    pin_memory = False


def test_transfers_are_measured_pageable_and_pinned_only_where_pinning_helps(small) -> None:
    device = Device(PageableOnly(), "fake")
    measured = roofline.measure_roofline(device, fresh=True)
    assert measured.h2d_bytes_per_s["pageable"] > 0 and measured.d2h_bytes_per_s["pageable"] > 0
    assert "pinned" not in measured.h2d_bytes_per_s
    assert "does not speed up" in measured.errors["h2d_pinned"]
    assert not math.isnan(measured.memory_bandwidth_bytes_per_s)


def test_cli_prints_the_cached_roofline(cli, cpu, tmp_path, monkeypatch) -> None:
    cache = tmp_path / "shared" / "peak.json"
    monkeypatch.setenv("ACCELBENCH_PEAK_CACHE", str(cache))
    roofline.remember(Roofline("cpu", "AMD", {"fp32": 1.5e11}, 6.5e9, 7e-6, {}, {},
                               "2999-01-01T00:00:00+00:00",
                               errors={"h2d": "the CPU is the host", "d2h": "the CPU is the host"}),
                      cpu)
    env = {"ACCELBENCH_PEAK_CACHE": str(cache), "COLUMNS": "120"}
    as_json = cli("roofline", "--device", "cpu", "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    (figures,) = json.loads(as_json.stdout)
    assert figures["matmul_flops"] == {"fp32": 1.5e11}
    table = cli("roofline", "--device", "cpu", env=env)
    assert "150.0 GFLOP/s" in table.stdout and "6.5 GB/s" in table.stdout
    assert "7 µs" in table.stdout and "CPU is the host" in table.stdout


def test_the_table_says_how_many_copies_each_bandwidth_window_queued() -> None:
    from accelbench.render.roofline_table import roofline_rows

    figures = Roofline("cuda:0", "x", {}, 3e12, 5e-6, {}, {}, "2026-01-01T00:00:00+00:00",
                       method={"bandwidth_buffer_bytes": 128 * 2**20, "bandwidth_copies_per_sync": 1200})
    rows = {row[0]: row for row in roofline_rows(figures)}
    assert rows["memory bandwidth"][2] == "copy of 128 MiB (read + write), 1200 a sync"
    older = Roofline("cuda:0", "x", {}, 3e12, 5e-6, {}, {}, "2026-01-01T00:00:00+00:00",
                     method={"bandwidth_buffer_bytes": 128 * 2**20})  # cached before the count
    assert {row[0]: row for row in roofline_rows(older)}["memory bandwidth"][2] == \
        "copy of 128 MiB (read + write)"


def test_a_held_peak_is_shown_beside_the_stored_burst_and_says_what_its_verdict_compares(
        cpu, tmp_path, monkeypatch) -> None:
    """Issue 26, item 8: "sustained 7.26 GB/s: holds its burst (109%)" stood beside a stored
    burst of 11.3 GB/s; the verdict compares with the run's own first intervals. The line now
    gives the share of the stored burst (64%), and names what the verdict compares with, at its
    rate; the JSON carries the same two figures."""
    from accelbench.cli import roofline as roofline_cli
    from accelbench.measure.ceilings import held as held_peaks
    from accelbench.measure.loop.sustained import SustainedSeries
    from accelbench.render.format import format_bytes_rate
    from accelbench.render.roofline_table import roofline_rows

    monkeypatch.setenv("ACCELBENCH_PEAK_CACHE", str(tmp_path / "peak.json"))
    stored = roofline.remember(Roofline("cpu", "AMD", {"fp32": 1.5e11}, 11.3e9, 7e-6, {}, {},
                                        "2999-01-01T00:00:00+00:00"), cpu)
    rates = [6.66e9, 6.66e9] + [7.26e9 * (1 + 0.001 * (i % 3 - 1)) for i in range(8)]
    held = SustainedSeries(0.25, 2.5, "bytes", rates, [1.0] * 10, [float(i + 1) for i in range(10)])
    monkeypatch.setattr(held_peaks, "hold_peaks", lambda *args, **kwargs: {"bandwidth": held})
    result = roofline_cli._hold(cpu, stored, 2.5, 0.25, ("fp32",), quiet=True)

    record = result.to_dict()["sustained"]["bandwidth"]
    sustained_rate = record["figures"]["sustained"]
    assert record["stored_burst"] == 11.3e9
    assert record["share_of_stored_burst"] == pytest.approx(sustained_rate / 11.3e9)
    assert record["figures"]["verdict"] == "holds" and record["figures"]["ratio"] > 1.05
    row = {name: (value, how) for name, value, how in roofline_rows(result)}["sustained bandwidth"]
    assert row[0] == format_bytes_rate(sustained_rate)
    assert row[1].startswith(f"{sustained_rate / 11.3e9:.0%} of the stored burst "
                             f"{format_bytes_rate(11.3e9)}; ")
    assert f"holds the rate of its own first 2 intervals at {format_bytes_rate(6.66e9)} (109%" in row[1]
    assert "holds its burst" not in row[1]
    # stored: a later `roofline` shows the same figures from the cache
    again = roofline.device_roofline(cpu).sustained["bandwidth"]
    assert again["share_of_stored_burst"] == record["share_of_stored_burst"]


def test_the_roofline_measures_a_busy_peak_again_before_showing_it(cpu, tmp_path, monkeypatch) -> None:
    """Issue 26, item 11: a matmul peak cached beside other work is not the roofline's figure
    once the machine is quiet (conftest makes it read quiet here)."""
    monkeypatch.setenv("ACCELBENCH_PEAK_CACHE", str(tmp_path / "peak.json"))
    roofline.remember(Roofline("cpu", "AMD", {"fp32": 47e9}, 6.5e9, 7e-6, {}, {},
                               "2999-01-01T00:00:00+00:00"), cpu)
    busy = contention.Conditions(1.0, others_cpu_share=0.6, steal_share=0.0)
    peak.record_measurement(cpu, "fp32", peak.MatmulTiming(47e9, 1024, 4, 5), conditions=busy)
    assert peak.cached_figure(cpu, "fp32").flops == 47e9
    monkeypatch.setattr(peak, "time_matmul", lambda device, precision, side=None: peak.MatmulTiming(
        142e9, 2048, 1, 5))
    shown = device_roofline(cpu)
    assert shown.matmul_flops["fp32"] == 142e9
    how = shown.method["matmul_fp32"]
    assert (how["matrix_side"], how["products_per_sync"], how["busy"]) == (2048, 1, "")
