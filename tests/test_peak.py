"""The peak FLOP/s a case's ``% peak`` is computed against: measured under the case's own
precision, timed with many products per synchronisation, a ceiling that only rises, and stored in
each result (issue 10: the poisoned peak, defects 5 and 6)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest
import torch
from fakes import FakeAsyncAdapter

from accelbench.devices import Device, DeviceSet
from accelbench.engine.precision import get_precision
from accelbench.engine.runner import Case, achieved_flops, skeleton_result
from accelbench.measure import peak
from accelbench.options import RunOptions


@pytest.fixture
def cpu() -> Device:
    return DeviceSet.current().select("cpu")[0]


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    path = tmp_path / "peak.json"
    monkeypatch.setenv("ACCELBENCH_PEAK_CACHE", str(path))
    return path


class Readings:
    """A stand-in timer returning planned FLOP/s figures, counting how often it was asked."""

    def __init__(self, *values: float) -> None:
        self.values, self.calls = list(values), 0

    def __call__(self, device, precision, side=None) -> peak.MatmulTiming:
        self.calls += 1
        return peak.MatmulTiming(self.values.pop(0), 64, 1, 1)


# --- defect 5: the peak is measured under the case's precision settings ---------------------

def test_the_peak_is_measured_under_the_case_precision_settings(cpu, own_cache, monkeypatch) -> None:
    seen: dict[str, tuple] = {}
    real = peak._timed_products

    def spy(device, precision, a, b, count):
        with peak.autocast(device, precision):
            product_dtype = torch.mm(a[:2, :2], b[:2, :2]).dtype
        seen[precision.name] = (torch.get_float32_matmul_precision(), a.dtype, product_dtype)
        return real(device, precision, a, b, count)

    monkeypatch.setattr(peak, "_timed_products", spy)
    for name in ("fp32", "tf32", "bf16", "amp-bf16"):
        peak.peak_figure(cpu, get_precision(name), side=32)
    assert seen["fp32"] == ("highest", torch.float32, torch.float32)
    assert seen["tf32"] == ("high", torch.float32, torch.float32)
    assert seen["bf16"] == ("highest", torch.bfloat16, torch.bfloat16)
    assert seen["amp-bf16"] == ("highest", torch.float32, torch.bfloat16)
    keys = json.loads(own_cache.read_text())["entries"]
    assert {key.split("|")[2] for key in keys} == {
        "float32", "float32,matmul=high", "bfloat16", "float32,autocast=bfloat16"}


def test_each_result_stores_the_peak_it_was_divided_by(cpu, own_cache, monkeypatch) -> None:
    options = RunOptions(size="tiny")
    timer = Readings(4e11, 9e11)
    monkeypatch.setattr(peak, "time_matmul", timer)
    figures = {}
    for name in ("tf32", "amp-bf16"):
        result = skeleton_result(Case("mnist", "train", cpu, 8, name), options)
        result.step_times = [0.01] * 5
        figures[name] = achieved_flops(result, cpu, get_precision(name))
    tf32, amp = figures["tf32"], figures["amp-bf16"]
    assert (tf32["peak_settings"], tf32["peak_flops"]) == ("float32,matmul=high", 4e11)
    assert (amp["peak_settings"], amp["peak_flops"]) == ("float32,autocast=bfloat16", 9e11)
    assert amp["peak_precision"] == "amp-bf16" and amp["peak_dtype"] == "bfloat16"
    datetime.fromisoformat(tf32["peak_measured_at"])
    assert tf32["fraction_of_peak"] == pytest.approx(tf32["achieved_flops"] / 4e11)


# --- a peak measured at a bad moment does not poison every % peak ---------------------------

def _age(path, days: float) -> None:
    data = json.loads(path.read_text())
    old = (datetime.now(timezone.utc) - timedelta(days=days)).isoformat(timespec="seconds")
    for entry in data["entries"].values():
        entry["measured_at"] = entry["checked_at"] = old
    path.write_text(json.dumps(data))


def test_a_case_that_beats_the_cached_peak_has_it_measured_again(cpu, own_cache, monkeypatch) -> None:
    timer = Readings(107e9, 185e9)  # the first reading was taken while the machine was busy
    monkeypatch.setattr(peak, "time_matmul", timer)
    assert peak.peak_figure(cpu, "fp32").flops == 107e9
    assert peak.peak_figure(cpu, "fp32", at_least=100e9).flops == 107e9 and timer.calls == 1
    assert peak.peak_figure(cpu, "fp32", at_least=120e9).flops == 185e9 and timer.calls == 2
    assert peak.measured_peak_flops(cpu, "fp32") == 185e9


def test_a_lower_reading_never_replaces_the_best(cpu, own_cache, monkeypatch) -> None:
    timer = Readings(185e9, 107e9, 190e9)
    monkeypatch.setattr(peak, "time_matmul", timer)
    first = peak.peak_figure(cpu, "fp32")
    _age(own_cache, peak.MAX_AGE_DAYS + 1)  # an old entry is measured again ...
    again = peak.peak_figure(cpu, "fp32")
    assert timer.calls == 2 and again.flops == 185e9  # ... but a busy reading does not lower it
    entry = next(iter(json.loads(own_cache.read_text())["entries"].values()))
    assert entry["last_flops"] == 107e9 and entry["measured_at"] != entry["checked_at"]
    assert again.measured_at == entry["measured_at"] != first.measured_at
    assert peak.peak_figure(cpu, "fp32").flops == 185e9 and timer.calls == 2  # checked: fresh
    assert peak.peak_figure(cpu, "fp32", refresh=True).flops == 190e9  # an explicit re-measure


def test_a_cache_of_the_old_format_is_measured_again(cpu, own_cache, monkeypatch) -> None:
    key = peak.cache_key(cpu, torch.float32)
    own_cache.write_text(json.dumps({"version": 1, "entries": {key: {"flops": 107e9}}}))
    monkeypatch.setattr(peak, "time_matmul", Readings(185e9))
    assert peak.measured_peak_flops(cpu, torch.float32) == 185e9


# --- defect 6: many products per synchronisation -------------------------------------------

class SlowSyncAdapter(FakeAsyncAdapter):
    """A device whose synchronisation costs 5 ms (launch + sync latency, exaggerated): a timer
    that synchronises after every product measures the latency, not the products."""

    def synchronize(self, index: int) -> None:
        super().synchronize(index)
        time.sleep(0.005)


def test_sync_latency_is_amortised_over_many_products(monkeypatch) -> None:
    product_s = 50e-6  # each product costs this much wall time, whatever else the machine does

    def product(a, b):
        end = time.perf_counter() + product_s
        while time.perf_counter() < end:
            pass
        return a

    monkeypatch.setattr(peak.torch, "mm", product)
    side = 64
    timing = peak.time_matmul(Device(SlowSyncAdapter(), "fake"), "fp32", side=side)
    free_sync = peak.time_matmul(Device(FakeAsyncAdapter(), "fake"), "fp32", side=side)
    assert timing.products_per_sync >= 100
    # one product per sync read about 1% of the rate (5 ms of sync per 50 us of product)
    assert timing.flops > 0.5 * free_sync.flops


def test_the_side_grows_until_one_product_is_long_enough(cpu, monkeypatch) -> None:
    monkeypatch.setattr(peak, "MIN_PRODUCT_S", 1e9)  # never long enough: grow to the largest side
    monkeypatch.setattr(peak, "CPU_MAX_SIDE", 512)
    monkeypatch.setattr(peak, "MIN_REPEAT_S", 0.001)
    assert peak.time_matmul(cpu, "fp32", repeats=1).side == 512
    assert peak.time_matmul(cpu, "fp32", side=64, repeats=1).side == 64  # a side asked for is kept
