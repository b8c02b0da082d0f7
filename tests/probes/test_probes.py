"""Feature probes: real features on this CPU, planted faults for every status, the CLI.

Never compiles with inductor (tens of seconds on this CPU): compile probes use eager backends.
"""

from __future__ import annotations

import io
import json
import time
import warnings
from pathlib import Path

import pytest
import torch
from fakes import FakeAsyncAdapter
from rich.console import Console

from accelbench.cli import main
from accelbench.devices import DeviceSet
from accelbench.devices.base import Device
from accelbench.devices.cpu import CpuAdapter
from accelbench.options.recorded import RecordedProbe
from accelbench.probes import Feature, Trial, fallback_ops, result
from accelbench.probes import features as features_module
from accelbench.probes.cells import OpSeconds, first_line, probe_device, probe_feature
from accelbench.probes.features import all_features, select_features
from accelbench.probes.work import probe_record
from accelbench.render.probe_table import probe_table
from accelbench.results import RunRecord
from accelbench.store.jsonfile import load_record, save_record

CPU = Device(CpuAdapter(), "cpu")


@pytest.fixture(scope="module")
def registry() -> dict[str, Feature]:
    return {f.name: f for f in all_features()}


# --- real features on this machine's CPU ---------------------------------------------------------
WORKS_HERE = ["float64", "float16", "fft", "complex_conv1d", "functional_call", "forward_ad",
              "sdpa:math", "compile:eager", "autocast_fp16", "autocast_bf16", "channels_last",
              "transformer_fastpath", "matmul_precision_high"]


def test_features_that_work_on_this_cpu(registry: dict[str, Feature]) -> None:
    cells = probe_device(CPU, [registry[name] for name in WORKS_HERE], CPU)
    assert {name: cell.status for name, cell in cells.items()} == dict.fromkeys(WORKS_HERE, "works")
    for name, cell in cells.items():
        assert "max err" in cell.detail, name  # every one was checked against its reference
        assert cell.ratio is None  # the CPU is not timed against itself
        assert cell.seconds > 0
    assert "aten::_transformer_encoder_layer_fwd was dispatched" in cells["transformer_fastpath"].detail
    assert "ran in float32" in cells["sdpa:math"].detail
    assert "first call (compiling)" in cells["compile:eager"].detail


def test_features_that_fail_on_this_cpu(registry: dict[str, Feature]) -> None:
    cells = probe_device(CPU, [registry["complex32"], registry["sdpa:efficient"]], CPU)
    assert cells["complex32"].status == "fails"
    assert "NotImplementedError" in cells["complex32"].detail  # no ComplexHalf matmul on the CPU
    assert cells["sdpa:efficient"].status == "fails"
    assert "ran in no dtype" in cells["sdpa:efficient"].detail


def test_transformer_fastpath_detection_sees_a_disabled_fast_path(registry: dict[str, Feature]) -> None:
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        cell = probe_feature(registry["transformer_fastpath"], CPU, CPU)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    assert (cell.status, cell.detail) == (
        "fails", "the fast path did not run: aten::_transformer_encoder_layer_fwd was not dispatched")


def test_matmul_precision_is_restored(registry: dict[str, Feature]) -> None:
    before = torch.get_float32_matmul_precision()
    probe_feature(registry["matmul_precision_high"], CPU, CPU)
    assert torch.get_float32_matmul_precision() == before


def test_mps_only_feature_is_not_probed_on_the_cpu(registry: dict[str, Feature]) -> None:
    assert registry["mps_fallback"].kinds == ("mps",)
    assert probe_device(CPU, [registry["mps_fallback"]], CPU) == {}


# --- planted faults: one per status --------------------------------------------------------------
def _reference() -> torch.Tensor:
    return torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)


def test_a_raising_feature_fails_with_its_error_and_does_not_stop_the_others() -> None:
    def broken(device: str) -> Trial:
        raise ValueError("planted fault\nsecond line")

    fine = Feature("fine", "", lambda d: Trial([result(_reference().float().to(d))]), _reference)
    cells = probe_device(CPU, [Feature("broken", "", broken, _reference), fine], CPU)
    assert cells["broken"].status == "fails"
    assert cells["broken"].detail == "ValueError: planted fault"
    assert "planted fault" in cells["broken"].traceback
    assert cells["fine"].status == "works"


def test_a_perturbed_result_is_wrong_with_its_max_error() -> None:
    def perturbed(device: str) -> Trial:
        return Trial([result(_reference().float().to(device) + torch.tensor([0.0, 0.0, 2.0]))])

    cell = probe_feature(Feature("perturbed", "", perturbed, _reference), CPU, CPU)
    assert cell.status == "wrong"
    # 2.0 off where the reference's largest magnitude is 4.0: relative error 0.5, tolerance 1e-4
    assert cell.detail.startswith("max err 5.0e-01 > tol 1e-04")


def test_a_nan_result_is_wrong() -> None:
    nan = Feature("nan", "", lambda d: Trial([result(torch.full((3,), float("nan")))]), _reference)
    cell = probe_feature(nan, CPU, CPU)
    assert cell.status == "wrong"
    assert "max err inf" in cell.detail


def test_results_within_their_dtype_tolerance_work() -> None:
    # float16 rounding of 1, 2, 4 is exact; an error of 1e-3 relative passes float16's 1e-2
    half = Feature("half", "", lambda d: Trial([result(torch.tensor([1.0, 2.0, 4.004]).half())]),
                   _reference)
    assert probe_feature(half, CPU, CPU).status == "works"


def test_a_feature_that_did_not_do_its_job_fails() -> None:
    silent = Feature("silent", "", lambda d: Trial(failure="the fast path did not run"))
    cell = probe_feature(silent, CPU, CPU)
    assert (cell.status, cell.detail) == ("fails", "the fast path did not run")


def test_a_failing_feature_cannot_change_the_next_ones_conditions() -> None:
    def meddler(device: str) -> Trial:
        torch.set_float32_matmul_precision("medium")
        torch.set_grad_enabled(False)
        raise RuntimeError("left global state changed")

    before = torch.get_float32_matmul_precision()
    assert probe_feature(Feature("meddler", "", meddler), CPU, CPU).status == "fails"
    assert torch.get_float32_matmul_precision() == before
    assert torch.is_grad_enabled()


def _tf32_switches() -> dict[str, object]:
    """The switches that decide TF32 and cuDNN's algorithm search, as a kernel would read them."""
    seen: dict[str, object] = {"cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                               "cudnn_benchmark": torch.backends.cudnn.benchmark,
                               "matmul": torch.get_float32_matmul_precision()}
    conv = getattr(torch.backends.cudnn, "conv", None)  # torch >= 2.9: what cuDNN convs read
    if conv is not None:
        seen["cudnn_conv"] = conv.fp32_precision
    return seen


@pytest.fixture
def torch_defaults_tf32_on():
    """torch's own defaults (cuDNN TF32 on), plus cudnn.benchmark on as a run leaves it."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark
    torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = True, True
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = saved


def test_features_run_in_fp32_with_cudnn_tf32_and_benchmark_off(torch_defaults_tf32_on) -> None:
    """On Ampere, torch's default cuDNN TF32 would make channels_last and complex convolutions
    "wrong" (~5e-4 against the fp32 tolerance 1e-4): a feature runs under run's fp32 settings,
    and they are put back after it."""
    seen: list[dict[str, object]] = []

    def recorder(device: str) -> Trial:
        seen.append(_tf32_switches())
        return Trial()

    before = _tf32_switches()
    assert probe_feature(Feature("recorder", "", recorder), CPU, CPU).status == "works"
    expected = {"cudnn_allow_tf32": False, "cudnn_benchmark": False, "matmul": "highest"}
    if "cudnn_conv" in before:
        expected["cudnn_conv"] = "ieee"
    assert seen == [expected]
    assert _tf32_switches() == before


def test_a_feature_that_turns_cudnn_tf32_on_and_fails_leaves_the_next_one_in_fp32(
        torch_defaults_tf32_on) -> None:
    seen: list[dict[str, object]] = []

    def meddler(device: str) -> Trial:
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
        raise RuntimeError("left cuDNN switches changed")

    def recorder(device: str) -> Trial:
        seen.append(_tf32_switches())
        return Trial()

    before = _tf32_switches()
    cells = probe_device(CPU, [Feature("meddler", "", meddler), Feature("recorder", "", recorder)],
                         CPU)
    assert [cell.status for cell in cells.values()] == ["fails", "works"]
    assert seen[0]["cudnn_allow_tf32"] is False and seen[0]["cudnn_benchmark"] is False
    assert _tf32_switches() == before


class OwnTf32SwitchAdapter(FakeAsyncAdapter):
    """An accelerator on the CPU with a TF32 switch of its own (as XPU has oneDNN's)."""

    def __init__(self) -> None:
        super().__init__()
        self.tf32 = True

    def allow_tf32(self, allowed: bool):
        previous, self.tf32 = self.tf32, allowed

        def put_back() -> None:
            self.tf32 = previous
        return put_back


def test_the_probe_turns_the_devices_own_tf32_switch_off() -> None:
    adapter = OwnTf32SwitchAdapter()
    seen = []
    feature = Feature("recorder", "", lambda d: seen.append(adapter.tf32) or Trial(), timed=False)
    assert probe_feature(feature, Device(adapter, "fake"), CPU).status == "works"
    assert seen == [False] and adapter.tf32 is True


class SlowSyncAdapter(FakeAsyncAdapter):
    """An 'accelerator' on the CPU whose queued work takes 20 ms to finish at every sync."""

    def synchronize(self, index: int) -> None:
        super().synchronize(index)
        time.sleep(0.02)


def _matmul_feature() -> Feature:
    def run(device: str) -> Trial:
        a = _reference().float().to(device)
        return Trial([result(a)], op=lambda: a * 2)
    return Feature("tiny", "", run, _reference)


def test_an_accelerator_slower_than_the_cpu_is_slower_with_the_ratio() -> None:
    adapter = SlowSyncAdapter()
    cell = probe_feature(_matmul_feature(), Device(adapter, "fake"), CPU)
    assert cell.status == "slower"
    # every timed stretch ends with a 20 ms sync; the CPU does a 3-element multiply in microseconds
    assert cell.ratio is not None and cell.ratio > 10
    assert cell.detail.startswith(f"{cell.ratio:.2f}x slower than the CPU")
    assert adapter.syncs > 5  # the timing synchronised the device


def test_the_cpu_is_never_called_slower_than_itself() -> None:
    def sleepy(device: str) -> Trial:
        return Trial([result(_reference().float())], op=lambda: time.sleep(0.001))

    cell = probe_feature(Feature("sleepy", "", sleepy, _reference), CPU, CPU)
    assert (cell.status, cell.ratio) == ("works", None)


def test_an_untimed_feature_on_an_accelerator_has_no_ratio() -> None:
    feature = _matmul_feature()
    untimed = Feature(feature.name, "", feature.run, feature.reference, timed=False)
    cell = probe_feature(untimed, Device(SlowSyncAdapter(), "fake"), CPU)
    assert (cell.status, cell.ratio) == ("works", None)


# --- MPS fallback: torch's own words, recorded ---------------------------------------------------
FALLBACK_WARNING = ("UserWarning: The operator 'aten::nonzero' is not currently supported on the "
                    "MPS backend and will fall back to run on the CPU. This may have performance "
                    "implications. (Triggered internally at .../MPSFallback.mm:13.)")
FALLBACK_ERROR = ("The operator 'aten::_linalg_eig' is not currently implemented for the MPS "
                  "device. If you want this op to be added in priority during the prototype phase "
                  "of this feature, please comment on https://github.com/pytorch/pytorch/issues/"
                  "77764. As a temporary fix, you can set the environment variable "
                  "`PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a fallback for this op.")


def test_fallback_parser_names_ops_from_warnings_and_errors() -> None:
    messages = [FALLBACK_WARNING, "UserWarning: something else", FALLBACK_ERROR, FALLBACK_WARNING]
    assert fallback_ops(messages) == ["aten::nonzero", "aten::_linalg_eig"]
    assert fallback_ops(["The operator 'aten::add' is fine"]) == []


def test_fallback_warnings_in_any_probe_are_reported() -> None:
    def warns(device: str) -> Trial:
        warnings.warn(FALLBACK_WARNING.removeprefix("UserWarning: "), UserWarning, stacklevel=1)
        return Trial([result(_reference().float())])

    cell = probe_feature(Feature("warns", "", warns, _reference), CPU, CPU)
    assert cell.status == "works"
    assert "ran on the CPU via fallback: aten::nonzero" in cell.detail


def test_mps_fallback_probe_lists_ops_and_fails_without_the_fallback(monkeypatch) -> None:
    def warn(device: str) -> None:
        warnings.warn(FALLBACK_WARNING, UserWarning, stacklevel=1)

    def refuse(device: str) -> None:
        raise NotImplementedError(FALLBACK_ERROR)

    monkeypatch.setattr(features_module, "_MPS_SAMPLE_OPS",
                        {"nonzero": warn, "eig": refuse, "add": lambda d: None})
    trial = features_module._mps_fallback("cpu")
    assert trial.notes == ["of 3 sampled ops, no MPS kernel: aten::nonzero, aten::_linalg_eig"]
    assert trial.failure.startswith("no MPS kernel and no CPU fallback for aten::_linalg_eig (set "
                                    "PYTORCH_ENABLE_MPS_FALLBACK=1")
    monkeypatch.setattr(features_module, "_MPS_SAMPLE_OPS", {"nonzero": warn})
    assert features_module._mps_fallback("cpu").failure == ""  # fell back: works, ops named


# --- selection, errors, record, table ------------------------------------------------------------
def test_select_features_by_wildcard_and_skip_compile(registry: dict[str, Feature]) -> None:
    features = list(registry.values())
    assert [f.name for f in select_features(features, ["fft", "sdpa:m*"])] == ["fft", "sdpa:math"]
    assert "compile:inductor" in [f.name for f in select_features(features, ["compile:*"])]
    skipped = select_features(features, None, ("compile",))
    assert not any(f.name.startswith("compile:") for f in skipped)
    with pytest.raises(LookupError, match="nosuch"):
        select_features(features, ["fft", "nosuch*"])


def test_first_line_keeps_the_cause_announced_by_a_colon() -> None:
    error = RuntimeError("backend='tvm' raised:\nImportError: Please install apache-tvm\nmore")
    assert first_line(error) == "RuntimeError: backend='tvm' raised: ImportError: Please install apache-tvm"
    assert first_line(KeyError()) == "KeyError"


def test_probe_record_shape_survives_a_file_round_trip(tmp_path: Path) -> None:
    fine = Feature("fine", "", lambda d: Trial([result(_reference().float())]), _reference)
    broken = Feature("broken", "", lambda d: 1 / 0)  # type: ignore[arg-type, return-value]
    devices = DeviceSet.current()
    record = probe_record(devices, devices.select("cpu"), [fine, broken], ["accelbench", "probe"],
                          RecordedProbe(device="cpu", features=("fine", "broken")))
    loaded = load_record(save_record(record, tmp_path / "probe.json"))
    assert loaded.kind == "probe" and loaded.cases == []  # a probe is not a fake case
    (probe,) = loaded.probes
    assert probe.device == "cpu" and probe.device_name and probe.threads > 0
    assert list(probe.cells) == ["fine", "broken"]
    assert probe.cells["fine"].status == "works" and probe.cells["fine"].seconds > 0
    assert probe.cells["broken"].status == "fails"
    assert "ZeroDivisionError" in probe.cells["broken"].detail
    assert loaded.probes == record.probes
    assert loaded.options == record.options  # the probe's options, typed, through the file


def test_probe_table_shows_every_status_and_unprobed_cells() -> None:
    def cell(status: str, detail: str) -> dict[str, object]:
        return {"status": status, "detail": detail, "ratio": None, "seconds": 0.1}

    # A schema-1 record (devices as fake cases): the table reads it through the upgrade.
    data = {"schema_version": 1, "kind": "probe", "run_id": "r1", "created_at": "now",
            "accelbench_version": "0", "cases": [
                {"workload": "features", "mode": "probe", "device": "cpu", "batch_size": 1,
                 "extra": {"probe": {"fft": cell("works", "max err 1e-07"),
                                     "chalf": cell("fails", "NotImplementedError: no kernel")}}},
                {"workload": "features", "mode": "probe", "device": "cuda:0", "batch_size": 1,
                 "extra": {"probe": {"fft": cell("slower", "3.00x slower than the CPU"),
                                     "mps_fallback": cell("wrong", "max err 5e-01")}}}]}
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(probe_table(RunRecord.from_dict(data)))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    for needle in ("cuda:0", "works max err 1e-07", "fails NotImplementedError: no kernel",
                   "slower 3.00x slower than the CPU", "wrong max err 5e-01", "not probed"):
        assert needle in text


# --- the command ---------------------------------------------------------------------------------
def test_cli_probe_json_on_the_cpu(cli, accelbench_home: Path) -> None:
    proc = cli("probe", "--device", "cpu", "--feature", "float64", "--feature", "fft", "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["kind"] == "probe"
    assert record["cases"] == []
    (probe,) = record["probes"]
    assert probe["device"] == "cpu"
    assert {name: cell["status"] for name, cell in probe["cells"].items()} == {
        "float64": "works", "fft": "works"}
    saved = list((accelbench_home / "results").glob("*-probe-*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["run_id"] == record["run_id"]
    assert f"Saved to {saved[0]}" in " ".join(proc.stderr.split())


def test_cli_unknown_feature_is_a_one_line_usage_error(capsys) -> None:
    assert main(["probe", "--device", "cpu", "--feature", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("accelbench: error: no feature matches 'nosuch'; known features: float64")
    assert err.count("\n") == 1 and "fft" in err


def test_a_timing_whose_median_strays_from_its_best_is_noisy() -> None:
    assert OpSeconds(best=1.0, median=1.6).noisy
    assert not OpSeconds(best=1.0, median=1.2).noisy
