"""The fidelity fixes of issue 10 on real accelerators: these run where the device exists (marked
``cuda`` / ``mps``) and skip cleanly elsewhere. Their fakes live in test_fidelity_devices.py."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import torch

from accelbench.devices import DeviceSet
from accelbench.options import RunOptions, StopRule

NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
NO_MPS = pytest.mark.skipif(not torch.backends.mps.is_available(), reason="no MPS")


def _run(device: str, **overrides: Any) -> Any:
    from accelbench.engine.case import plan
    from accelbench.engine.runner import run_plan

    fields = {"workloads": ("mnist",), "device": device, "modes": ("train",), "size": "tiny",
              "stop": StopRule("steps", 3), "warmup_steps": 1, "isolation": "none", **overrides}
    options = RunOptions(**fields)
    devices = DeviceSet.current()
    return run_plan(options, devices, plan(options, devices), ["test"])


def _parity(device: str, precision: str) -> dict[str, Any]:
    from accelbench.parity.core import run_parity
    from accelbench.workloads.catalogue import get_workload_class

    devices = DeviceSet.current()
    return run_parity(get_workload_class("mnist"), "tiny", devices.select(device)[0], precision, "",
                      False, "cpu-fp64", devices.select("cpu")[0], steps=5, batch_size=16)


@pytest.mark.cuda
@NO_CUDA
@pytest.mark.parametrize("precision,tf32", [("fp32", False), ("tf32", True)])
def test_cuda_cases_run_and_record_the_tf32_switches(precision: str, tf32: bool) -> None:
    case = _run("cuda", precisions=(precision,)).cases[0]
    assert case.ok, case.error
    assert case.backend_flags["cudnn_allow_tf32"] is tf32
    assert case.backend_flags["cuda_matmul_allow_tf32"] is tf32


@pytest.mark.cuda
@NO_CUDA
@pytest.mark.parametrize("benchmark", [True, False])
def test_cuda_cases_record_cudnn_benchmark_as_asked(benchmark: bool) -> None:
    case = _run("cuda", cudnn_benchmark=benchmark).cases[0]
    assert case.ok, case.error
    assert case.backend_flags["cudnn_benchmark"] is benchmark
    assert case.backend_flags["cudnn_allow_tf32"] is False


@pytest.mark.cuda
@NO_CUDA
def test_cuda_probe_convolutions_are_fp32_not_wrong() -> None:
    """On Ampere and later, cuDNN's default TF32 (~5e-4) would fail the fp32 tolerance (1e-4)."""
    from accelbench.probes.cells import probe_device
    from accelbench.probes.features import all_features

    devices = DeviceSet.current()
    wanted = {"channels_last", "complex_conv1d"}
    cells = probe_device(devices.select("cuda")[0], [f for f in all_features() if f.name in wanted],
                         devices.select("cpu")[0])
    assert set(cells) == wanted
    # "slower" is a timing finding; the numbers were within the fp32 tolerance either way
    assert all(cell.status in ("works", "slower") for cell in cells.values()), {
        name: (cell.status, cell.detail) for name, cell in cells.items()}


@pytest.mark.cuda
@NO_CUDA
@pytest.mark.parametrize("precision", ["fp32", "tf32"])
def test_cuda_check_passes_in_its_own_precision(precision: str) -> None:
    assert _parity("cuda", precision)["verdict"] in ("pass", "drift")


DESCRIBE = """
import torch
from accelbench.devices import DeviceSet
from accelbench.devices.doctor import doctor_report
from accelbench.devices.environment import collect_environment
devices = DeviceSet.current()
collect_environment(devices)
doctor_report(devices)
print([bool(torch._C._cuda_hasPrimaryContext(i)) for i in range(torch.cuda.device_count())])
"""


@pytest.mark.cuda
@NO_CUDA
def test_describing_the_machine_leaves_every_gpu_without_a_context() -> None:
    if not hasattr(torch._C, "_cuda_hasPrimaryContext"):
        pytest.skip("this torch cannot tell whether a primary context exists")
    out = subprocess.run([sys.executable, "-c", DESCRIBE], capture_output=True, text=True,
                         check=True, timeout=120)
    assert "True" not in out.stdout.strip().splitlines()[-1], out.stdout


@pytest.mark.mps
@NO_MPS
def test_mps_check_runs_without_float64_on_the_device() -> None:
    assert _parity("mps", "fp32")["verdict"] != "failed"


@pytest.mark.mps
@NO_MPS
def test_mps_peak_memory_is_at_least_the_parameters_and_says_its_source() -> None:
    case = _run("mps").cases[0]
    assert case.ok, case.error
    assert case.peak_memory_bytes and case.peak_memory_bytes > 0
    assert case.memory_source and isinstance(case.memory_is_lower_bound, bool)
