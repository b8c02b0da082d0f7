"""The switches in force while a case's work runs: fp32 is fp32 (every TF32 switch off, whichever
torch API governs the kernels), tf32 is TF32 on XPU too (oneDNN's own switch), and cudnn.benchmark
is on for timed commands unless ``--no-cudnn-benchmark``. Read where the work happens: a workload
that notes the switches each time its training step runs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from conftest_report import assert_one_line_error
from torch.overrides import TorchFunctionMode

import accelbench
from accelbench.devices.base import Device
from accelbench.devices.numerics import backend_flags, get_precision, precision_settings
from accelbench.devices.xpu import ONEDNN_TF32_FLAG, XpuAdapter
from accelbench.selftest import precision as selftest_precision
from accelbench.selftest.result import PASS

FINE = getattr(torch.backends.cudnn, "conv", None) is not None  # torch >= 2.9's per-op switches

#: A workload whose training step notes the switches in force into the file $FLAG_RECORD.
RECORDER = '''
import json
import os

import torch
import torch.nn.functional as F
from torch import nn

import accelbench
from accelbench.data.synthetic import synthetic_epoch


def _batch(generator, n):
    return torch.randn(n, 1, 8, 8, generator=generator), torch.randint(0, 2, (n,), generator=generator)


@accelbench.register
class FlagRecorder(accelbench.Workload):
    name = "flag-recorder"
    description = "notes the TF32 and cuDNN switches each time a training step runs"
    modes = ("train",)
    default_batch_size = tiny_batch_size = {"train": 4, "eval": 4}
    dataset_size = tiny_dataset_size = {"train": 16, "eval": 16}

    def build_model(self):
        return nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(72, 2))

    def make_optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.1)

    def make_batches(self, mode, batch_size, options):
        return synthetic_epoch(_batch, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model, batch):
        backends = torch.backends
        seen = {"cudnn_allow_tf32": backends.cudnn.allow_tf32,
                "cudnn_benchmark": backends.cudnn.benchmark,
                "matmul": torch.get_float32_matmul_precision()}
        if getattr(backends.cudnn, "conv", None) is not None:
            seen["cudnn_conv"] = backends.cudnn.conv.fp32_precision
        with open(os.environ["FLAG_RECORD"], "a") as out:
            out.write(json.dumps(seen) + "\\n")
        x, y = batch
        return F.cross_entropy(model(x), y)
'''


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(the workload file, the file each training step appends the switches it saw to)."""
    source = tmp_path / "flag_recorder.py"
    source.write_text(RECORDER)
    seen = tmp_path / "seen.jsonl"
    monkeypatch.setenv("FLAG_RECORD", str(seen))
    return source, seen


def read_seen(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def fp32_seen(benchmark: bool) -> dict[str, Any]:
    expected: dict[str, Any] = {"cudnn_allow_tf32": False, "cudnn_benchmark": benchmark,
                                "matmul": "highest"}
    if FINE:
        expected["cudnn_conv"] = "ieee"
    return expected


@pytest.fixture
def cudnn_defaults():
    """torch's defaults for the two cuDNN switches (TF32 on, benchmark off), put back after."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark
    torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = True, False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = saved


# --- run: the flags in force while the steps run, and in the record -------------------------------
@pytest.mark.parametrize("benchmark", [True, False])
def test_run_steps_run_in_fp32_with_cudnn_benchmark_as_asked(recorder, cudnn_defaults,
                                                            benchmark: bool) -> None:
    source, seen = recorder
    keywords = {} if benchmark else {"cudnn_benchmark": False}
    record = accelbench.run("flag-recorder", device="cpu", workload_file=str(source), size="tiny",
                            steps=2, warmup=1, isolation="none", save=False, **keywords)
    case = record.cases[0]
    assert case.ok, case.error
    # The warm-up step and the two measured ones (a later call counts the step's FLOPs, on the
    # CPU, outside the case).
    assert read_seen(seen)[:3] == [fp32_seen(benchmark)] * 3
    assert case.backend_flags["cudnn_benchmark"] is benchmark
    assert case.backend_flags["cudnn_allow_tf32"] is False
    assert record.options.run_options().cudnn_benchmark is benchmark
    # Put back after the case.
    assert torch.backends.cudnn.allow_tf32 is True and torch.backends.cudnn.benchmark is False


def test_no_cudnn_benchmark_reaches_the_worker_process(cli, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    proc = cli("run", "mnist", "--device", "cpu", "--size", "tiny", "--mode", "train", "--steps",
               "2", "--warmup", "1", "--no-cudnn-benchmark", "-o", str(out), "--db",
               str(tmp_path / "h.db"), timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    case = data["cases"][0]
    assert case["status"] == "ok" and data["options"]["isolation"] == "process"
    assert case["backend_flags"]["cudnn_benchmark"] is False
    assert case["backend_flags"]["cudnn_allow_tf32"] is False
    assert data["options"]["cudnn_benchmark"] is False


@pytest.mark.parametrize(("args", "needles"), [
    (["check", "mnist", "--no-cudnn-benchmark"], ["unrecognized arguments: --no-cudnn-benchmark"]),
    (["probe", "--no-cudnn-benchmark"], ["unrecognized arguments: --no-cudnn-benchmark"]),
    (["run", "mnist", "--no-cudnn-benchmark=off"], ["--no-cudnn-benchmark", "ignored explicit"]),
    (["sweep", "mnist", "--batch-size", "1,2", "--no-cudnn-benchmark=1"], ["--no-cudnn-benchmark"]),
])
def test_no_cudnn_benchmark_bad_usage_is_one_line(inline_cli, args: list[str],
                                                  needles: list[str]) -> None:
    assert_one_line_error(inline_cli(*args), *needles)


def test_the_api_keyword_takes_only_a_switch() -> None:
    from accelbench.errors import UsageError

    with pytest.raises(UsageError, match="cudnn_benchmark is a switch: True or False, got 'no'"):
        accelbench.run("mnist", cudnn_benchmark="no")


def test_check_runs_with_cudnn_benchmark_off_and_says_so() -> None:
    from accelbench.options import RunOptions
    from accelbench.options.check import CheckOptions

    assert CheckOptions(RunOptions()).run.cudnn_benchmark is False


# --- scale: every rank's steps, through torchrun --------------------------------------------------
def test_scale_ranks_run_in_fp32_and_record_their_flags(cli, recorder, tmp_path: Path) -> None:
    source, seen = recorder
    out = tmp_path / "scale.json"
    proc = cli("scale", "flag-recorder", "--workload-file", str(source), "--device", "cpu",
               "--size", "tiny", "--nproc", "1", "--steps", "2", "--warmup", "1", "-o", str(out),
               timeout=150, env={"FLAG_RECORD": str(seen)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = read_seen(seen)
    # warm-up, the timed steps and the no-sync steps: all fp32 (a fresh process has torch's
    # default, cuDNN TF32 on), with cudnn.benchmark on as in run
    assert len(steps) == 5 and all(step == fp32_seen(True) for step in steps), steps
    data = json.loads(out.read_text())
    flags = data["cases"][0]["backend_flags"]
    assert flags["cudnn_benchmark"] is True and flags["cudnn_allow_tf32"] is False
    assert flags["float32_matmul_precision"] == "highest"
    assert data["options"]["cudnn_benchmark"] is True


def test_scale_no_cudnn_benchmark_reaches_the_ranks_spec(monkeypatch, tmp_path: Path) -> None:
    """--no-cudnn-benchmark goes into the options, the record and every rank's spec (the ranks
    set what the spec says: the torchrun test above reads it in the steps)."""
    from accelbench.cli import build_parser
    from accelbench.cli.scale import options_from_args
    from accelbench.devices import DeviceSet
    from accelbench.engine.launchers import torchrun
    from accelbench.engine.launchers.choose import one_launcher
    from accelbench.engine.supervise import ChildOutcome
    from accelbench.scale.work import ScaleWork, launch_plan

    args = build_parser(["scale"]).parse_args(["scale", "mnist", "--device", "cpu", "--size",
                                               "tiny", "--nproc", "1", "--no-cudnn-benchmark"])
    options = options_from_args(args)
    cpu = DeviceSet.current().select("cpu")[0]
    assert options.run.cudnn_benchmark is False and options.run_options(cpu).cudnn_benchmark is False
    specs = []

    def launch(command: list[str], *rest: object) -> ChildOutcome:
        specs.append(json.loads(Path(command[-1]).read_text()))
        return ChildOutcome(1, [])

    monkeypatch.setattr(torchrun, "in_torchrun", launch)
    ScaleWork(options, options.run_options(cpu), cpu, "gloo").launch(
        one_launcher(launch_plan(options)), 1, None)
    assert specs[0]["work"] == "accelbench.engine.runner:run_from_spec"  # a rank runs run's work
    assert specs[0]["options"]["cudnn_benchmark"] is False


# --- torch >= 2.9: the per-op switches are what the kernels read ---------------------------------
@pytest.mark.skipif(not FINE, reason="this torch has no per-op fp32_precision switches")
def test_fp32_is_fp32_even_when_a_parent_switch_says_tf32() -> None:
    """cudnn.allow_tf32 = False only sets conv and rnn to "none", which inherits: with
    ``torch.backends.fp32_precision = "tf32"`` (a library's or the user's) cuDNN would still
    run TF32. Every op is set explicitly, and what each op reads is put back after."""
    backends = torch.backends
    try:
        backends.fp32_precision = "tf32"
        before = backend_flags()
        assert before["cudnn_conv_fp32_precision"] == "tf32"
        with precision_settings(get_precision("fp32")):
            flags = backend_flags()
            for switch in (backends.cudnn.conv, backends.cudnn.rnn, backends.cuda.matmul,
                           backends.mkldnn.matmul, backends.mkldnn.conv, backends.mkldnn.rnn):
                assert switch.fp32_precision == "ieee"
            assert flags["cudnn_allow_tf32"] is False and flags["cuda_matmul_allow_tf32"] is False
        with precision_settings(get_precision("tf32")):
            assert backends.cudnn.conv.fp32_precision == "tf32"
            assert backends.cuda.matmul.fp32_precision == "tf32"
            assert backend_flags()["float32_matmul_precision"] == "high"
        after = backend_flags()
        assert {name: after[name] for name in before if name.endswith("_fp32_precision")} == {
            name: before[name] for name in before if name.endswith("_fp32_precision")}
        # ... and what inherited goes on inheriting: nothing is left pinned to "tf32", so the
        # process (and the next test) is as it was once torch's own switch goes back.
        backends.fp32_precision = "none"
        assert {name: value for name, value in backend_flags().items()
                if name.endswith("_fp32_precision")} == {
            name: "none" for name in before if name.endswith("_fp32_precision")}
    finally:
        backends.fp32_precision = "none"


@pytest.mark.skipif(not FINE, reason="this torch has no per-op fp32_precision switches")
def test_backend_flags_record_what_each_kernel_family_reads() -> None:
    with precision_settings(get_precision("fp32")):
        fp32 = backend_flags()
    with precision_settings(get_precision("tf32")):
        tf32 = backend_flags()
    for name in ("cuda_matmul", "cudnn_conv", "cudnn_rnn", "mkldnn_matmul", "mkldnn_conv"):
        assert (fp32[f"{name}_fp32_precision"], tf32[f"{name}_fp32_precision"]) == ("ieee", "tf32")


def test_cudnn_benchmark_is_off_unless_asked_and_put_back(cudnn_defaults) -> None:
    with precision_settings(get_precision("fp32"), cudnn_benchmark=True):
        assert backend_flags()["cudnn_benchmark"] is True
    torch.backends.cudnn.benchmark = True
    with precision_settings(get_precision("fp32")):  # check, probe: off
        assert backend_flags()["cudnn_benchmark"] is False
    assert torch.backends.cudnn.benchmark is True


# --- XPU: oneDNN's own TF32 switch ----------------------------------------------------------------
def fake_xpu_torch(onednn_tf32: bool | None = False, dpas: bool = True) -> Any:
    """torch as an XPU build shows it: ``backends.mkldnn.allow_tf32`` (None where the build has no
    XPU), device properties with or without DPAS (XMX) units."""
    props = SimpleNamespace(name="Intel(R) Arc(TM) B580 Graphics", total_memory=12 * 2**30,
                            max_compute_units=160, driver_version="1.6",
                            has_subgroup_matrix_multiply_accumulate=dpas)
    return SimpleNamespace(
        backends=SimpleNamespace(mkldnn=SimpleNamespace(allow_tf32=onednn_tf32)),
        xpu=SimpleNamespace(_is_compiled=lambda: True, is_available=lambda: True,
                            device_count=lambda: 1, get_device_properties=lambda index: props))


class OnCpuXpuAdapter(XpuAdapter):
    """The XPU adapter over a fake torch whose tensors live on the CPU."""

    def torch_device(self, index: int) -> str:
        return "cpu"

    def synchronize(self, index: int) -> None:
        return None


class OneDnnTf32(TorchFunctionMode):
    """Products on a fake Intel GPU: fp32 operands are cut to TF32 (10-bit mantissa) while oneDNN's
    switch is on, as the XPU kernels do; the fp32 matmul precision does not reach them."""

    def __init__(self, fake_torch: Any) -> None:
        super().__init__()
        self.mkldnn = fake_torch.backends.mkldnn

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in (torch.mm, torch.matmul) and self.mkldnn.allow_tf32:
            args = tuple((a.view(torch.int32) & ~0x1FFF).view(torch.float32)
                         if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a
                         for a in args)
        return func(*args, **(kwargs or {}))


def test_xpu_tf32_sets_onednns_switch_and_records_it() -> None:
    fake = fake_xpu_torch(onednn_tf32=False)
    xpu = Device(XpuAdapter(fake), "xpu")
    with precision_settings(get_precision("tf32"), xpu):
        assert fake.backends.mkldnn.allow_tf32 is True
        assert backend_flags(xpu)[ONEDNN_TF32_FLAG] is True
    assert fake.backends.mkldnn.allow_tf32 is False
    fake.backends.mkldnn.allow_tf32 = True  # left on by the user: fp32 turns it off, then back
    with precision_settings(get_precision("fp32"), xpu):
        assert backend_flags(xpu)[ONEDNN_TF32_FLAG] is False
    assert fake.backends.mkldnn.allow_tf32 is True


def test_an_xpu_build_without_the_switch_has_no_flag_and_no_tf32() -> None:
    fake = fake_xpu_torch(onednn_tf32=None)  # torch < 2.7, or a build without XPU
    xpu = Device(XpuAdapter(fake), "xpu")
    with precision_settings(get_precision("tf32"), xpu):
        assert ONEDNN_TF32_FLAG not in backend_flags(xpu)
    assert fake.backends.mkldnn.allow_tf32 is None
    assert xpu.info()["tf32"] is False and not selftest_precision.tf32_expected(xpu.info())


def test_selftest_expects_tf32_on_an_intel_gpu_with_dpas_and_sees_it() -> None:
    fake = fake_xpu_torch(onednn_tf32=False, dpas=True)
    xpu = Device(OnCpuXpuAdapter(fake), "xpu")
    assert xpu.info()["tf32"] is True
    with OneDnnTf32(fake):
        result = selftest_precision.check_tf32(xpu)
    assert result.figures["tf32_expected"] is True
    assert result.status == PASS and result.figures["relative_difference"] > 0, result.detail
    no_dpas = Device(OnCpuXpuAdapter(fake_xpu_torch(dpas=False)), "xpu")
    assert selftest_precision.tf32_expected(no_dpas.info()) is False
