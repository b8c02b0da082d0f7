"""Accelerator fidelity: defects of issue 10 in the device paths, caught with fakes that fail the
way the hardware does (MPS refuses float64, mem_get_info creates a CUDA context, NVML numbers GPUs
by PCI bus, TORCH_WARN_ONCE warns once per process)."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from fakes import (
    MAC_FACTS_ARM,
    FakeAsyncAdapter,
    FakeNvml,
    WarnsOncePerProcess,
    fake_cuda_torch,
    fake_gpu_uuid,
    fake_torch,
    mps_like_tensor,
    with_accelerator_device_index,
)
from torch import nn

from accelbench import Workload, register
from accelbench.data.synthetic import synthetic_epoch
from accelbench.devices import Device, DeviceSet
from accelbench.devices.cpu import CpuAdapter
from accelbench.devices.cuda import CudaAdapter
from accelbench.devices.generic import GenericAcceleratorAdapter
from accelbench.devices.mps import MpsAdapter
from accelbench.devices.numerics import backend_flags, get_precision, precision_settings
from accelbench.devices.xpu import XpuAdapter
from accelbench.options import RunOptions, StopRule
from accelbench.parity.core import _output_difference, _parameter_difference, run_parity
from accelbench.probes import Feature, Trial
from accelbench.probes.cells import probe_feature


# --- 1. parity converts to float64 on the CPU (MPS has no float64) -------------------------------
def test_the_mps_fake_refuses_float64_like_mps() -> None:
    with pytest.raises(TypeError, match="float64"):
        mps_like_tensor([1.0]).double()


def test_parity_differences_go_to_the_cpu_before_float64() -> None:
    candidate, reference = mps_like_tensor([3.0, 4.0]), mps_like_tensor([3.0, 4.5])
    assert _output_difference(candidate, reference) == pytest.approx(0.5 / (3**2 + 4.5**2) ** 0.5)

    class OnMps(nn.Module):
        def __init__(self, values: list[float]) -> None:
            super().__init__()
            self.weight = nn.Parameter(mps_like_tensor(values))

    assert _parameter_difference(OnMps([1.0, 2.0]), OnMps([1.0, 2.0])) == 0.0


# --- 2 and 11. the parent describes GPUs without a CUDA context; NVML maps by UUID ---------------
@pytest.fixture
def nvml_reversed(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """NVML lists the GPUs in the other order than torch (CUDA_VISIBLE_DEVICES=1,0)."""
    nvml = FakeNvml([f"GPU-{fake_gpu_uuid(1)}", f"GPU-{fake_gpu_uuid(0)}"])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml


def test_describing_the_machine_creates_no_cuda_context(nvml_reversed: FakeNvml) -> None:
    from accelbench.devices.doctor import doctor_report
    from accelbench.devices.environment import collect_environment

    fake = fake_cuda_torch(count=2)
    devices = DeviceSet([CpuAdapter(), CudaAdapter(fake)])
    environment = collect_environment(devices)
    doctor_report(devices)
    assert fake.cuda.contexts == []
    # Free memory still there, from NVML, for the GPU torch means (NVML's second one for cuda:0).
    assert environment["devices"]["cuda:0"]["memory_free_bytes"] == 11 * 2**30
    assert environment["devices"]["cuda:1"]["memory_free_bytes"] == 10 * 2**30


def test_without_nvml_free_memory_is_left_out_with_the_reason(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    fake = fake_cuda_torch(count=1)
    info = CudaAdapter(fake).info(0)
    assert fake.cuda.contexts == [] and "memory_free_bytes" not in info
    assert "nvidia-ml-py" in info["memory_free_note"]


def test_gpu_sensors_follow_torchs_numbering_not_nvmls(nvml_reversed: FakeNvml) -> None:
    adapter = CudaAdapter(fake_cuda_torch(count=2))
    assert adapter.sensors(0) == {"gpu_temperature_c": 41, "gpu_sm_clock_mhz": 1001}
    assert adapter.sensors(1) == {"gpu_temperature_c": 40, "gpu_sm_clock_mhz": 1000}
    assert (nvml_reversed.inits, nvml_reversed.shutdowns) == (1, 0)  # one session per process


def test_an_nvml_error_leaves_the_gpu_described(nvml_reversed: FakeNvml, monkeypatch) -> None:
    def not_supported(handle: str) -> None:
        raise nvml_reversed.NVMLError("Not Supported")

    monkeypatch.setattr(nvml_reversed, "nvmlDeviceGetMemoryInfo", not_supported)
    monkeypatch.setattr(nvml_reversed, "nvmlDeviceGetTemperature", lambda h, s: not_supported(h))
    adapter = CudaAdapter(fake_cuda_torch(count=1))
    info = adapter.info(0)
    assert info["name"] == "Fake GPU 0" and "Not Supported" in info["memory_free_note"]
    assert "Not Supported" in adapter.sensors(0)["error"]
    assert (nvml_reversed.inits, nvml_reversed.shutdowns) == (1, 0)  # one session per process


def test_case_sensors_give_the_cpu_and_the_right_gpu(nvml_reversed: FakeNvml) -> None:
    from accelbench.measure.trackers.sensors import case_sensors

    readings = case_sensors(Device(CudaAdapter(fake_cuda_torch(count=2)), "cuda", 0))
    assert readings["gpu_temperature_c"] == 41 and readings["gpu_sm_clock_mhz"] == 1001


def test_energy_and_sensors_share_one_mapping(nvml_reversed: FakeNvml) -> None:
    from accelbench.measure.trackers.energy_nvml import NvmlSource

    source = NvmlSource(0, torch_module=fake_cuda_torch(count=2))
    assert source.available() == (True, "")
    assert nvml_reversed.handles_used[-1] == f"GPU-{fake_gpu_uuid(0)}"


def test_without_uuids_cuda_visible_devices_maps_the_index(monkeypatch) -> None:
    from accelbench.devices.nvml import nvml_handle

    nvml = FakeNvml(["GPU-a", "GPU-b", "GPU-c"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    no_uuid = fake_torch()  # get_device_properties gives no uuid
    assert nvml_handle(nvml, 0, no_uuid) == "GPU-c"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-b")
    assert nvml_handle(nvml, 0, no_uuid) == "GPU-b"


# --- 3. fp32 is fp32 for matmul and cuDNN; tf32 is TF32 for both; flags recorded -----------------
def test_fp32_turns_cudnn_tf32_off_and_tf32_turns_both_on() -> None:
    torch.backends.cudnn.allow_tf32 = True  # torch's default, which made fp32 convolutions TF32
    before = backend_flags()
    with precision_settings(get_precision("fp32")):
        flags = backend_flags()
        assert flags["cudnn_allow_tf32"] is False and flags["cuda_matmul_allow_tf32"] is False
        assert flags["float32_matmul_precision"] == "highest"
    with precision_settings(get_precision("tf32")):
        flags = backend_flags()
        assert flags["cudnn_allow_tf32"] is True and flags["cuda_matmul_allow_tf32"] is True
    for name in ("amp-bf16", "bf16", "amp-fp16"):
        with precision_settings(get_precision(name)):
            assert backend_flags()["cudnn_allow_tf32"] is False
    assert backend_flags() == before  # restored


def _tiny(**overrides: Any) -> RunOptions:
    fields = {"workloads": ("mnist",), "device": "cpu", "modes": ("train",), "size": "tiny",
              "stop": StopRule("steps", 2), "warmup_steps": 0, "isolation": "none", **overrides}
    return RunOptions(**fields)


def test_every_case_records_its_backend_flags() -> None:
    from accelbench.engine.case import plan
    from accelbench.engine.runner import run_plan

    devices = DeviceSet([CpuAdapter()])
    options = _tiny(precisions=("fp32", "tf32"))
    record = run_plan(options, devices, plan(options, devices), ["test"])
    flags = {case.precision: case.backend_flags for case in record.cases}
    assert flags["fp32"]["cudnn_allow_tf32"] is False
    assert flags["tf32"]["cudnn_allow_tf32"] is True
    assert flags["tf32"]["float32_matmul_precision"] == "high"


def test_published_gpu_fp32_cnn_figures_say_they_were_tf32() -> None:
    from accelbench.reference.published import EPOCH_REFERENCES

    a6000 = next(ref for ref in EPOCH_REFERENCES if "A6000" in ref.machine)
    assert "TF32" in a6000.caveats


# --- 4. check --precision tf32 really runs the candidate in TF32 ---------------------------------
SEEN: list[tuple[torch.dtype, str, bool]] = []


class RecordsSwitches(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        SEEN.append((x.dtype, torch.get_float32_matmul_precision(),
                     bool(torch.backends.cudnn.allow_tf32)))
        return self.fc(x)


@register
class SwitchesWorkload(Workload):
    name = "fidelity-switches"
    description = "records the numeric switches its forward pass runs under"
    default_batch_size = tiny_batch_size = {"train": 4, "eval": 4}
    dataset_size = tiny_dataset_size = {"train": 32, "eval": 8}

    def build_model(self) -> nn.Module:
        return RecordsSwitches()

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.05)

    def make_batches(self, mode: str, batch_size: int, options: Any) -> Any:
        def batch(generator: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.randn(n, 8, generator=generator), torch.randint(0, 2, (n,),
                                                                         generator=generator)
        return synthetic_epoch(batch, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        return F.cross_entropy(model(batch[0]), batch[1])

    def eval_step(self, model: nn.Module, batch: Any) -> torch.Tensor:
        return model(batch[0])


def test_check_runs_the_tf32_candidate_with_tf32_on_and_the_reference_without() -> None:
    SEEN.clear()
    cpu = DeviceSet([CpuAdapter()]).select("cpu")[0]
    parity = run_parity(SwitchesWorkload, "tiny", cpu, "tf32", "", False, "cpu-fp64", cpu,
                        steps=3, batch_size=4)
    assert parity["verdict"] in ("pass", "drift")
    candidate = {(p, tf32) for dtype, p, tf32 in SEEN if dtype == torch.float32}
    reference = {(p, tf32) for dtype, p, tf32 in SEEN if dtype == torch.float64}
    assert candidate == {("high", True)}
    assert reference == {("highest", False)}


# --- 7. MPS peak memory: torch's counter where it exists, else a labelled lower bound ------------
def _mps_torch(allocated: list[int], peak_counter: int | None) -> Any:
    torch_module = fake_torch(mps_built=True, mps_available=True)
    torch_module.mps = type("M", (), {"synchronize": staticmethod(lambda: None),
                                      "current_allocated_memory": staticmethod(lambda: allocated[0])})
    if peak_counter is not None:
        torch_module.accelerator.memory_stats = lambda index: {
            "allocated_bytes.all.peak": peak_counter, "allocated_bytes.all.current": allocated[0]}
        torch_module.accelerator.reset_peak_memory_stats = lambda index: None
    return torch_module


def test_mps_peak_comes_from_torchs_counter_where_it_keeps_one() -> None:
    allocated = [100]
    adapter = MpsAdapter(_mps_torch(allocated, peak_counter=9_000), MAC_FACTS_ARM)
    adapter.reset_peak_memory(0)
    allocated[0] = 500  # what a sample at a step boundary sees: activations already freed
    adapter.synchronize(0)
    assert adapter.peak_memory_bytes(0) == 9_000
    assert not adapter.memory_is_lower_bound and "lower bound" not in adapter.memory_source


def test_mps_without_a_counter_is_a_lower_bound_until_read() -> None:
    adapter = MpsAdapter(_mps_torch([100], peak_counter=None), MAC_FACTS_ARM)
    assert adapter.memory_is_lower_bound  # not known yet: never claimed a true peak
    adapter.peak_memory_bytes(0)
    assert adapter.memory_is_lower_bound and "lower bound" in adapter.memory_source


def test_every_case_stores_its_memory_source_and_bound() -> None:
    from accelbench.engine.case import plan
    from accelbench.engine.runner import run_plan

    devices = DeviceSet([CpuAdapter()])
    options = _tiny()
    case = run_plan(options, devices, plan(options, devices), ["test"]).cases[0]
    assert case.memory_source == "process peak RSS"
    assert case.memory_is_lower_bound is False


# --- 12. once-per-process warnings are seen by every probe ---------------------------------------
FALLBACK = ("The operator 'aten::fake_op' is not currently supported on the MPS backend and will "
            "fall back to run on the CPU. This may have performance implications.")


def test_a_fallback_warned_once_per_process_is_seen_by_every_probe() -> None:
    op = WarnsOncePerProcess(FALLBACK)

    def run(device: str) -> Trial:
        op()
        return Trial()

    cpu = DeviceSet([CpuAdapter()]).select("cpu")[0]
    before = torch.is_warn_always_enabled()
    for name in ("first", "second"):
        cell = probe_feature(Feature(name, "falls back", run, timed=False), cpu, cpu)
        assert "ran on the CPU via fallback: aten::fake_op" in cell.detail, name
    assert torch.is_warn_always_enabled() == before


def test_the_mps_fallback_probe_sees_each_op_every_time(monkeypatch) -> None:
    from accelbench.probes import features

    ops = {"a": WarnsOncePerProcess(FALLBACK.replace("fake_op", "op_a"))}
    monkeypatch.setattr(features, "_MPS_SAMPLE_OPS", {"a": lambda device: ops["a"]()})
    for _ in range(2):
        trial = features._mps_fallback("cpu")
        assert "no MPS kernel: aten::op_a" in trial.notes[0]


# --- 13. a cuda:N worker or rank makes N current ---------------------------------------------------
class RecordingAdapter(FakeAsyncAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.made_current: list[int] = []

    def make_current(self, index: int) -> None:
        self.made_current.append(index)

    @contextlib.contextmanager
    def current(self, index: int) -> Iterator[None]:
        self.made_current.append(index)
        try:
            yield
        finally:
            self.made_current.append(-1)  # the previous device current again


def test_cuda_make_current_sets_the_device_index() -> None:
    fake = fake_cuda_torch(count=2)
    CudaAdapter(fake).make_current(1)
    assert fake.cuda.current == 1


def test_single_device_kinds_do_nothing_on_make_current() -> None:
    CpuAdapter().make_current(0)
    MpsAdapter(fake_torch(), MAC_FACTS_ARM).make_current(0)


def test_a_case_makes_its_device_current_before_anything_touches_it(monkeypatch) -> None:
    """run_case makes the device current first: inline (--isolation none) and in the worker,
    which calls run_case."""
    import accelbench.engine.measure_case
    from accelbench.engine.case import Case
    from accelbench.engine.measure_case import run_case

    adapter = RecordingAdapter()
    seen: list[list[int]] = []

    def fake_measure(case: Any, *args: Any) -> None:
        seen.append(list(adapter.made_current))

    monkeypatch.setattr(accelbench.engine.measure_case, "_measure", fake_measure)
    monkeypatch.setattr(accelbench.engine.measure_case, "unsupported_reason", lambda device, precision: None)
    device = Device(adapter, "fake", 1)
    run_case(Case(workload="mnist", mode="train", device=device, batch_size=4), _tiny(device="fake:1"))
    assert seen == [[1]]
    assert adapter.made_current == [1, -1]  # and the previous device current again after it


def test_a_scale_rank_makes_its_device_current() -> None:
    from accelbench.engine.launchers.backends import rank_device

    adapter = RecordingAdapter()
    devices = DeviceSet([CpuAdapter(), adapter])
    device = rank_device(devices, devices.select("fake")[0], local_rank=1)
    assert device.name == "fake:1" and adapter.made_current == [1]


# --- 14. pin memory only where it helps --------------------------------------------------------------
def test_pin_memory_only_on_cuda_and_xpu() -> None:
    assert CudaAdapter(fake_torch()).pin_memory and XpuAdapter(fake_torch()).pin_memory
    assert not CpuAdapter().pin_memory
    assert not MpsAdapter(fake_torch(), MAC_FACTS_ARM).pin_memory
    assert not GenericAcceleratorAdapter("hpu", fake_torch()).pin_memory


def test_the_runner_asks_the_device_whether_to_pin(monkeypatch) -> None:
    from accelbench.engine.case import plan
    from accelbench.engine.runner import run_plan
    from accelbench.workloads.catalogue import get_workload_class

    pinned: list[bool] = []
    mnist = get_workload_class("mnist")
    real = mnist.make_batches

    def spy(self: Any, mode: str, batch_size: int, options: Any) -> Any:
        pinned.append(options.pin_memory)
        return real(self, mode, batch_size, dataclasses.replace(options, pin_memory=False))

    monkeypatch.setattr(mnist, "make_batches", spy)
    devices = DeviceSet([CpuAdapter(), FakeAsyncAdapter()])  # an accelerator that does not pin
    options = _tiny(device="fake:0")
    run_plan(options, devices, plan(options, devices), ["test"])
    assert pinned == [False]


def test_devices_expose_the_adapter_facts() -> None:
    device = Device(CudaAdapter(fake_torch()), "cuda", 0)
    assert device.pin_memory and not device.memory_is_lower_bound
    assert "max_memory_allocated" in device.memory_source


# --- issue 19, 14. the probe worker and selftest make their device current, and restore -----------
@pytest.mark.parametrize("accelerator_guard", [True, False], ids=["torch.accelerator", "torch.cuda"])
def test_device_current_sets_and_restores_without_a_context_on_the_previous_gpu(
        accelerator_guard: bool) -> None:
    # A cuda:1 worker starts with GPU 0 "current" but never touched: making cuda:1 current and
    # back must not create a context on GPU 0 (torch's maybe-exchange on the way back).
    fake = fake_cuda_torch(count=2)
    if accelerator_guard:
        with_accelerator_device_index(fake)  # torch >= 2.8; else torch.cuda.device
    device = Device(CudaAdapter(fake), "cuda", 1)
    with device.current():
        assert fake.cuda.current == 1
    assert fake.cuda.current == 0
    assert fake.cuda.contexts == [("set_device", 1)]


def test_device_current_restores_a_device_that_has_a_context() -> None:
    fake = fake_cuda_torch(count=2)
    fake.cuda.synchronize(0)  # GPU 0 has a context
    with Device(CudaAdapter(fake), "cuda", 1).current():
        pass
    assert fake.cuda.current == 0 and fake.cuda.contexts[-1] == ("set_device", 0)


def test_device_current_without_torchs_guards_reads_and_sets_back() -> None:
    # A back end known only through torch.accelerator on torch 2.6/2.7: no device_index, no
    # torch.<kind>.device.
    from types import SimpleNamespace

    state = {"index": 0}
    accelerator = SimpleNamespace(
        current_accelerator=lambda: SimpleNamespace(type="hpu"), device_count=lambda: 2,
        current_device_index=lambda: state["index"],
        set_device_index=lambda index: state.update(index=index))
    adapter = GenericAcceleratorAdapter("hpu", SimpleNamespace(accelerator=accelerator))
    with Device(adapter, "hpu", 1).current():
        assert state["index"] == 1
    assert state["index"] == 0


def test_single_device_kinds_have_nothing_to_make_current() -> None:
    with Device(CpuAdapter(), "cpu").current(), \
            Device(MpsAdapter(fake_torch(), MAC_FACTS_ARM), "mps").current():
        pass


def _two_fake_gpus() -> tuple[Any, DeviceSet, Device, Device]:
    fake = with_accelerator_device_index(fake_cuda_torch(count=2))
    devices = DeviceSet([CpuAdapter(), CudaAdapter(fake)])
    return fake, devices, devices.select("cuda:1")[0], devices.select("cuda:0")[0]


def test_selftest_runs_each_devices_checks_with_it_current(monkeypatch) -> None:
    # The checks of cuda:1 ran with GPU 0 current (a timing event records on the current
    # device's stream: GPU 0 was timed), and parity's make_current(1) leaked into cuda:0's.
    from accelbench.selftest import suite
    from accelbench.selftest.result import CheckResult

    fake, devices, gpu1, gpu0 = _two_fake_gpus()
    seen: list[tuple[str, int]] = []

    def checks(group: str, device: Device, devices: DeviceSet, quick: bool) -> list[Any]:
        def check() -> CheckResult:
            seen.append((f"{group} {device.name}", fake.cuda.current))
            if group == "parity":
                device.make_current()  # as check_case does for every case
            return CheckResult(group, "current", device.name, "pass", "")
        return [check]

    monkeypatch.setattr(suite, "_checks", checks)
    suite.run_selftest(devices, [gpu1, gpu0], groups=("timing", "parity"))
    assert seen == [("timing cuda:1", 1), ("parity cuda:1", 1),
                    ("timing cuda:0", 0), ("parity cuda:0", 0)]
    assert fake.cuda.current == 0


def test_an_inline_probe_runs_with_its_device_current_and_restores_it() -> None:
    from accelbench.probes.work import ProbeWork

    fake, devices, gpu1, _ = _two_fake_gpus()
    seen: list[int] = []

    def run(torch_device: str) -> Trial:
        seen.append(fake.cuda.current)
        return Trial()

    feature = Feature("where", "which device is current", run, timed=False, kinds=("cuda",))
    ProbeWork([feature], devices.select("cpu")[0]).inline(gpu1, None)
    assert seen == [1]
    assert fake.cuda.current == 0


# --- issue 19, 14 (loose end). run and check restore the current device after each case -----------
def _no_device_work(monkeypatch: pytest.MonkeyPatch, fake: Any, seen: list[tuple[str, int]]) -> None:
    """The runner's and check's device work replaced by a note of the current device (the fake
    GPUs cannot run torch): what ran where is what the test reads."""
    import accelbench.engine.measure_case as runner
    import accelbench.parity.check as check

    def measure(case: Any, *args: Any) -> None:
        seen.append((f"measure {case.device.name}", fake.cuda.current))

    def flops(result: Any, device: Any, precision: Any) -> dict[str, Any]:
        seen.append((f"peak {device.name}", fake.cuda.current))  # the peak may be measured
        return {"error": "not counted"}

    def parity(workload: Any, size: str, device: Any, *args: Any) -> dict[str, Any]:
        seen.append((f"parity {device.name}", fake.cuda.current))
        return {"verdict": "pass"}

    monkeypatch.setattr(runner, "_measure", measure)
    monkeypatch.setattr(runner, "achieved_flops", flops)
    monkeypatch.setattr(runner, "unsupported_reason", lambda device, precision: None)
    monkeypatch.setattr(check, "unsupported_reason", lambda device, precision: None)
    monkeypatch.setattr(check, "run_parity", parity)


def test_an_inline_run_over_two_gpus_leaves_no_device_current(monkeypatch) -> None:
    # make_current(N) without a restore left cuda:1 current after an --isolation none run, for
    # whatever ran next in the process (the next case's stray work, the report's device calls).
    from accelbench.engine.case import plan
    from accelbench.engine.runner import run_plan

    fake, devices, _, _ = _two_fake_gpus()
    seen: list[tuple[str, int]] = []
    _no_device_work(monkeypatch, fake, seen)
    options = _tiny(device="cuda:0,cuda:1")
    record = run_plan(options, devices, plan(options, devices), ["test"])
    assert [case.status for case in record.cases] == ["ok", "ok"]
    assert seen == [("measure cuda:0", 0), ("peak cuda:0", 0), ("measure cuda:1", 1),
                    ("peak cuda:1", 1)]
    assert fake.cuda.current == 0


def test_an_inline_check_over_two_gpus_leaves_no_device_current(monkeypatch) -> None:
    from accelbench.options.check import CheckOptions
    from accelbench.parity.check import run_check

    fake, devices, _, _ = _two_fake_gpus()
    seen: list[tuple[str, int]] = []
    _no_device_work(monkeypatch, fake, seen)
    options = CheckOptions(run=_tiny(device="cuda:0,cuda:1"), steps=2)
    record = run_check(options, devices, ["test"])
    assert [case.parity.verdict for case in record.cases] == ["pass", "pass"]
    assert seen == [("parity cuda:0", 0), ("parity cuda:1", 1)]
    assert fake.cuda.current == 0


def test_a_device_that_cannot_be_made_current_is_the_cases_status(monkeypatch) -> None:
    from accelbench.engine.case import Case
    from accelbench.engine.measure_case import run_case
    from accelbench.options.check import CheckOptions
    from accelbench.parity.check import check_case

    fake, devices, gpu1, _ = _two_fake_gpus()

    def broken(index: int) -> Any:
        raise RuntimeError("CUDA error: invalid device ordinal")

    fake.accelerator.device_index = broken
    case = Case(workload="mnist", mode="train", device=gpu1, batch_size=4)
    result = run_case(case, _tiny(device="cuda:1"))
    assert (result.status, result.error) == ("failed", "RuntimeError: CUDA error: invalid device ordinal")
    checked = check_case(case, CheckOptions(run=_tiny(device="cuda:1"), steps=2), devices)
    assert checked.status == "failed" and checked.parity.verdict == "failed"
    assert "invalid device ordinal" in checked.parity.error
