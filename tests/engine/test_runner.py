"""The runner: sensors around each case, cooldown between cases, plan expansion."""

from __future__ import annotations

import time

from fakes import FakeAsyncAdapter

from accelbench.devices import DeviceSet
from accelbench.devices.cpu import CpuAdapter
from accelbench.engine.case import plan
from accelbench.engine.runner import run_plan
from accelbench.options import RunOptions, StopRule


class SensorAdapter(FakeAsyncAdapter):
    def sensors(self, index: int) -> dict:
        return {"gpu_temperature_c": 61}


def tiny(**overrides) -> RunOptions:
    fields = {"workloads": ("mnist",), "device": "cpu", "modes": ("train",), "size": "tiny",
              "stop": StopRule("steps", 2), "warmup_steps": 0, "isolation": "none", **overrides}
    return RunOptions(**fields)


def test_sensors_are_read_at_start_and_end_of_each_case() -> None:
    devices = DeviceSet([CpuAdapter(), SensorAdapter()])
    options = tiny(device="fake:1")
    record = run_plan(options, devices, plan(options, devices), ["test"])
    sensors = record.cases[0].sensors
    assert sensors.start.gpu_temperature_c == 61 and sensors.end.gpu_temperature_c == 61


def test_cooldown_waits_between_cases_not_before() -> None:
    devices = DeviceSet.current()
    options = tiny(modes=("train", "eval"), cooldown=1.5)
    start = time.perf_counter()
    record = run_plan(options, devices, plan(options, devices), ["test"])
    elapsed = time.perf_counter() - start
    assert [c.status for c in record.cases] == ["ok", "ok"]
    assert elapsed >= 1.5


def test_plan_expands_precisions_backends_and_devices() -> None:
    devices = DeviceSet([CpuAdapter(), FakeAsyncAdapter()])
    options = tiny(device="cpu,fake:0", modes=("train", "eval"), precisions=("fp32", "bf16"),
                   compile_backends=("", "eager"))
    cases = plan(options, devices)
    assert len(cases) == 2 * 2 * 2 * 2
    assert {(c.precision, c.compile_backend) for c in cases} == {
        ("fp32", ""), ("fp32", "eager"), ("bf16", ""), ("bf16", "eager")}
    assert cases[0].batch_size == 8 and cases[-1].batch_size == 16  # tiny train / eval batches


def test_achieved_flops_and_fraction_of_the_measured_peak() -> None:
    from accelbench.workloads.facts import flops_per_sample

    devices = DeviceSet.current()
    options = tiny(stop=StopRule("steps", 3))
    case = run_plan(options, devices, plan(options, devices), ["test"]).cases[0]
    flops = case.flops
    assert flops.per_sample == flops_per_sample("mnist", "train", "tiny") > 0
    assert flops.achieved_flops == flops.per_sample * case.throughput()
    assert 0 < flops.fraction_of_peak == flops.achieved_flops / flops.peak_flops
    assert flops.peak_dtype == "float32"


class MetaAdapter(FakeAsyncAdapter):
    """A device on which nothing can be computed: every real op fails."""

    def torch_device(self, index: int) -> str:
        return "meta"


def test_unsupported_combination_is_a_status_and_the_run_goes_on() -> None:
    devices = DeviceSet([CpuAdapter(), MetaAdapter()])
    options = tiny(device="fake:0,cpu", precisions=("bf16",))
    record = run_plan(options, devices, plan(options, devices), ["test"])
    meta, cpu = record.cases
    assert meta.status == "unsupported" and "bf16 on fake:0" in meta.error
    assert cpu.status == "ok"


def test_compile_failure_naming_an_unsupported_device_is_unsupported() -> None:
    from accelbench.engine.case import status_of

    assert status_of(RuntimeError("Unsupported device type: mps")) == "unsupported"
    assert status_of(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")) == "oom"
    assert status_of(MemoryError()) == "oom"
    assert status_of(ValueError("shapes do not match")) == "failed"


class SyncCountingSensors(FakeAsyncAdapter):
    """Reports the synchronisations so far as its "clock": when each reading was taken."""

    def sensors(self, index: int) -> dict:
        return {"gpu_sm_clock_mhz": self.syncs}


def test_sensors_start_reading_is_taken_after_warm_up_not_at_idle() -> None:
    # A start reading taken before any work says nothing about throttling under load.
    adapter = SyncCountingSensors()
    devices = DeviceSet([CpuAdapter(), adapter])
    options = tiny(device="fake:0", warmup_steps=2, stop=StopRule("steps", 3))
    sensors = run_plan(options, devices, plan(options, devices), ["test"]).cases[0].sensors
    assert sensors.start.gpu_sm_clock_mhz >= 3  # after the warm-up's synchronisations
    assert sensors.end.gpu_sm_clock_mhz >= sensors.start.gpu_sm_clock_mhz + 3
