"""Issue 34, "peaks that say what they are": a matmul peak timed while the device was held at its
power cap is labelled capped (roofline, selftest, a case's % of peak, JSON), with a short burst
measured beside it; a peak measured beside other work is marked busy wherever a case uses it, and
measured again before use once the machine is quiet."""

from __future__ import annotations

import pytest
from fakes import FakeQueueAdapter, PowerCappedGpu, PowerCappedProducts

from accelbench.devices import Device, DeviceSet, contention
from accelbench.devices.contention import Conditions
from accelbench.devices.numerics import get_precision
from accelbench.engine.case import Case, skeleton_result
from accelbench.engine.measure_case import achieved_flops
from accelbench.measure.ceilings import peak
from accelbench.measure.ceilings.peak_clocks import ClockWatch
from accelbench.measure.ceilings.roofline import Roofline, stored_burst, with_current_peaks
from accelbench.options import RunOptions
from accelbench.render.roofline_table import roofline_rows
from accelbench.render.table import flops_text
from accelbench.results import CaseResult
from accelbench.results.figures import Flops
from accelbench.selftest import ceilings


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    path = tmp_path / "peak.json"
    monkeypatch.setenv("ACCELBENCH_PEAK_CACHE", str(path))
    return path


@pytest.fixture(scope="module")
def capped() -> tuple[Device, peak.MatmulTiming]:
    """One fp32 peak timed on a GPU held at its power cap (boost for 30 ms after idle, then half
    the rate: 2e11 -> 1e11 FLOP/s), 1024² products."""
    gpu = PowerCappedGpu()
    device = Device(gpu, "fake", 0)
    with PowerCappedProducts(gpu):
        timing = peak.time_matmul(device, "fp32", side=1024)
    return device, timing


def _case(device: Device, precision: str = "fp32") -> CaseResult:
    """An mnist training case on ``device`` with its FLOP/s figures, as the engine stores them."""
    result = skeleton_result(Case(workload="mnist", mode="train", device=device, batch_size=8,
                                  precision=precision), RunOptions(size="tiny"))
    result.step_times = [0.01] * 5
    result.flops = Flops.from_dict(achieved_flops(result, device, get_precision(precision)), "flops")
    return result


def _roofline(device: Device, flops: float) -> Roofline:
    return Roofline(device.name, "x", {"fp32": flops}, float("nan"), float("nan"), {}, {},
                    "2026-01-01T00:00:00+00:00", method={"bandwidth_buffer_bytes": 2**20})


def test_a_peak_timed_at_the_power_cap_says_so_with_its_clock(capped) -> None:
    _, timing = capped
    assert timing.clocks.limited_by == ("software power cap",)
    assert timing.clocks.clock_mhz is not None and timing.clocks.clock_mhz < 1980
    # the short burst, after idle, runs at the boost rate: well above the capped windows
    assert timing.burst_flops is not None and timing.burst_flops > 1.3 * timing.flops


def test_a_capped_peak_is_labelled_in_the_case_the_roofline_and_selftest(capped, own_cache,
                                                                        monkeypatch) -> None:
    device, timing = capped
    monkeypatch.setattr(peak, "time_matmul", lambda *args, **kwargs: timing)
    case = _case(device)
    # the result's JSON: what the % of peak was divided by, and that it was capped
    assert case.flops.peak_limited_by == ["software power cap"]
    assert case.flops.peak_burst_flops == timing.burst_flops
    assert case.to_dict()["flops"]["peak_limited_by"] == ["software power cap"]
    assert "of a capped peak" in flops_text(case)
    # the roofline (its figure is the peak cache's) names the cap and shows the burst beside it
    shown = with_current_peaks(_roofline(device, 1.0), device)
    assert shown.method["matmul_fp32"]["limited_by"] == ["software power cap"]
    rows = {figure: (value, how) for figure, value, how in roofline_rows(shown)}
    assert "capped: software power cap at" in rows["matmul fp32 (capped)"][1]
    assert "matmul fp32 burst" in rows
    assert shown.to_dict()["method"]["matmul_fp32"]["clock_mhz"] == timing.clocks.clock_mhz  # --json
    # a sustained run is held against the short burst, not the capped figure it equals
    assert stored_burst(shown, "matmul_fp32") == timing.burst_flops
    # selftest's check of that figure
    [fp32] = [r for r in ceilings.judge_roofline(device, shown) if r.name.startswith("matmul fp32")]
    assert "capped: software power cap" in fp32.detail


def test_a_peak_with_no_slowdown_or_no_sensor_is_not_called_capped() -> None:
    # boost clocks only: nothing to label
    quiet = ClockWatch(Device(FakeQueueAdapter(), "fake", 0),
                       read=lambda: {"gpu_sm_clock_mhz": 1980, "gpu_clock_events": []})
    quiet.start()
    clocks = quiet.stop()
    assert (clocks.limited_by, clocks.clock_mhz, clocks.na) == ((), 1980.0, "")
    # an accelerator that reports nothing (no NVML): said, never "uncapped"
    silent = ClockWatch(Device(FakeQueueAdapter(), "fake", 0))
    silent.start()
    assert "reports no clock-event reasons" in silent.stop().na


# --- a busy peak ------------------------------------------------------------------------------
BUSY = Conditions(0.5, others_cpu_share=0.6, steal_share=0.0)
QUIET = Conditions(0.2, others_cpu_share=0.0, steal_share=0.0)


def test_a_case_held_against_a_busy_peak_says_so_until_the_machine_is_quiet(own_cache, monkeypatch) -> None:
    """The next run used 59.7 GFLOP/s measured beside other work, against 150.1 from a plain
    product, with no mark: now the result says so, and once the machine is quiet the peak is
    measured again before it is used."""
    cpu = DeviceSet.current().select("cpu")[0]
    peak.record_measurement(cpu, "fp32", peak.MatmulTiming(59.7e9, 256, 4, 5), conditions=BUSY)
    monkeypatch.setattr(peak, "time_matmul", lambda *args, **kwargs: peak.MatmulTiming(150.1e9, 512, 4, 5))
    monkeypatch.setattr(peak, "RECHECK_AFTER_S", 3600.0)  # checked just now: only quiet re-measures
    monkeypatch.setattr(contention, "now", lambda: BUSY)  # still as busy
    held = _case(cpu)
    assert held.flops.peak_flops == 59.7e9
    assert "other processes used 60% of the CPUs" in held.flops.peak_busy
    assert held.to_dict()["flops"]["peak_busy"] == held.flops.peak_busy
    assert "of a busy peak" in flops_text(held)
    roofline = with_current_peaks(_roofline(cpu, 1.0), cpu)
    assert "measured beside other work" in dict((f, h) for f, _, h in roofline_rows(roofline))["matmul fp32"]
    [fp32] = [r for r in ceilings.judge_roofline(cpu, roofline) if r.name.startswith("matmul fp32")]
    assert "busy: other processes used 60%" in fp32.detail
    # quiet again: measured before it is used, and the mark is gone
    monkeypatch.setattr(contention, "now", lambda: QUIET)

    class QuietWatch:  # the re-measurement's own window: quiet too (whatever runs beside the test)
        def start(self) -> None: ...

        def stop(self) -> Conditions:
            return QUIET

    monkeypatch.setattr(contention, "ContentionWatch", QuietWatch)
    quiet = _case(cpu)
    assert quiet.flops.peak_flops == 150.1e9 and quiet.flops.peak_busy == ""
    assert "busy" not in flops_text(quiet)
