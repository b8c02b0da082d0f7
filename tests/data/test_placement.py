"""Where a case's batches live (issue 10, defects 9 and 14): --data synthetic copies host batches
every step, pinned where the device adapter says pinning helps; --data synthetic-device keeps the
pool on the device; the mode is part of the result and reaches it from the command line."""

from __future__ import annotations

import pytest
import torch
from fakes import FakeAsyncAdapter

from accelbench.cli import main
from accelbench.data.placement import place_batches, source_kind
from accelbench.data.synthetic import EpochBatches
from accelbench.devices import DeviceSet
from accelbench.devices.base import Device
from accelbench.devices.cpu import CpuAdapter
from accelbench.engine.case import plan
from accelbench.engine.measure_case import run_case
from accelbench.options import RunOptions, StopRule


class PinningAdapter(FakeAsyncAdapter):
    """A CUDA-like device: pinned host memory makes its copies asynchronous."""

    pin_memory = True


class MpsLikeAdapter(FakeAsyncAdapter):
    kind = "mps"
    pin_memory = False


class MetaAdapter(FakeAsyncAdapter):
    def torch_device(self, index: int) -> str:
        return "meta"


def pool_epoch() -> EpochBatches:
    return EpochBatches([(torch.ones(4, 2), torch.zeros(4, dtype=torch.long))] * 2, 10, 4)


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """Fake page-locking (this machine has no GPU, so torch cannot pin): the storage addresses
    of 'pinned' tensors are remembered."""
    addresses: set[int] = set()

    def pin_memory(self: torch.Tensor) -> torch.Tensor:
        copy = self.clone()
        addresses.add(copy.untyped_storage().data_ptr())
        return copy

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory)
    return addresses


def test_host_pool_is_pinned_where_the_adapter_says_it_helps(pinned: set[int]) -> None:
    device = Device(PinningAdapter(), "fake", 0)
    assert device.pin_memory
    batches = list(place_batches(pool_epoch(), "synthetic", device))
    assert [len(b[0]) for b in batches] == [4, 4, 2]
    # Every tensor a step copies, the partial last batch's slice included, is page-locked.
    assert all(t.untyped_storage().data_ptr() in pinned for batch in batches for t in batch)


@pytest.mark.parametrize("adapter,kind", [(MpsLikeAdapter(), "mps"), (CpuAdapter(), "cpu")])
def test_no_pinning_where_it_only_costs(adapter, kind: str, pinned: set[int]) -> None:
    device = Device(adapter, kind, 0)
    epoch = pool_epoch()
    assert not device.pin_memory
    assert place_batches(epoch, "synthetic", device) is epoch and not pinned


def test_device_resident_pool_lives_on_the_device() -> None:
    device = Device(MetaAdapter(), "fake", 0)
    batches = list(place_batches(pool_epoch(), "synthetic-device", device))
    assert [len(b[0]) for b in batches] == [4, 4, 2]
    assert {t.device.type for batch in batches for t in batch} == {"meta"}


def test_device_resident_mode_needs_a_synthetic_pool() -> None:
    own = [(torch.ones(4, 2),)]
    with pytest.raises(NotImplementedError, match="synthetic-device is not supported"):
        place_batches(own, "synthetic-device", Device(MetaAdapter(), "fake", 0))
    assert place_batches(own, "synthetic", Device(CpuAdapter(), "cpu", 0)) is own


def test_workloads_are_asked_for_synthetic_data_in_both_synthetic_modes() -> None:
    assert source_kind("synthetic-device") == source_kind("synthetic") == "synthetic"
    assert source_kind("real") == "real"


def test_a_device_resident_case_runs_and_says_so_in_its_result() -> None:
    options = RunOptions(workloads=("mnist",), device="cpu", modes=("eval",), size="tiny",
                         stop=StopRule("steps", 2), warmup_steps=0, isolation="none",
                         data="synthetic-device")
    case = plan(options, DeviceSet.current())[0]
    result = run_case(case, options)
    assert result.status == "ok", result.error
    assert result.data == "synthetic-device" and result.to_dict()["data"] == "synthetic-device"


def test_data_mode_and_target_reach_the_options_from_the_command_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import accelbench.cli.run as run_cli

    seen = {}

    def fake_execute(args, argv):  # stop after parsing: only the options are under test
        seen["options"] = run_cli.options_from_args(args)
        return 0

    monkeypatch.setattr(run_cli, "execute", fake_execute)
    assert main(["run", "mnist", "--data", "synthetic-device", "--time-budget", "3",
                 "--target-ci", "0.5"]) == 0
    options = seen["options"]
    assert options.data == "synthetic-device" and options.stop == StopRule("time", 3, 0.5)
    assert main(["run", "mnist"]) == 0 and seen["options"].stop.target_ci_pct == 2.0
    assert main(["run", "mnist", "--steps", "5", "--target-ci", "1"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--target-ci" in error and "--steps" in error


def test_the_device_resident_pools_bytes_are_counted_once_per_storage() -> None:
    """What the runner sets aside from the peak (issue 19, item 10): the synthetic-device pool on
    an accelerator, each storage once (a batch repeated in the pool is one allocation); nothing
    for the host modes, or on the CPU, where every mode's pool is the same host memory."""
    from accelbench.data.placement import device_pool_bytes

    fake = Device(FakeAsyncAdapter(), "fake", 0)
    cpu = Device(CpuAdapter(), "cpu", 0)
    one_batch = 4 * 2 * 4 + 4 * 8  # float32 (4, 2) and int64 (4,)
    placed = place_batches(pool_epoch(), "synthetic-device", fake)
    assert device_pool_bytes(placed, "synthetic-device", fake) == one_batch  # [batch] * 2: one
    distinct = EpochBatches([(torch.ones(4, 2), torch.zeros(4, dtype=torch.long)) for _ in range(3)],
                            12, 4)
    assert device_pool_bytes(place_batches(distinct, "synthetic-device", fake), "synthetic-device",
                             fake) == 3 * one_batch
    assert device_pool_bytes(place_batches(pool_epoch(), "synthetic", fake), "synthetic", fake) == 0
    assert device_pool_bytes(place_batches(pool_epoch(), "synthetic-device", cpu),
                             "synthetic-device", cpu) == 0
