"""A timed training step makes no host sync of accelbench's own (issue 10, defect 8): on an
accelerator every ``.item()``/``get_scale()`` stalls the host until the device catches up, so the
host cannot queue the next step. The parity check still learns which steps the scaler skipped."""

from __future__ import annotations

import pytest
import torch
from fakes import FakeQueueAdapter, HostSyncCounter

from accelbench.data.options import DataOptions
from accelbench.data.synthetic import EpochBatches, synthetic_epoch
from accelbench.devices.base import Device
from accelbench.devices.numerics import get_precision
from accelbench.engine.steps import make_train_step
from accelbench.measure.loop.step_loop import StepLoop
from accelbench.options import StopRule
from accelbench.workloads.base import Batch, Workload

WARMUP, STEPS = 2, 6


class TinyClassifier(Workload):
    """A linear classifier: the step mechanics of a real workload at a size that runs in ms."""

    name = "tiny-classifier"

    def build_model(self) -> torch.nn.Module:
        return torch.nn.Linear(16, 4)

    def make_optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adadelta(model.parameters())

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> EpochBatches:
        def batch(generator: torch.Generator, size: int) -> Batch:
            return torch.randn(size, 16, generator=generator), torch.randint(4, (size,))
        return synthetic_epoch(batch, 64, batch_size, options.seed)

    def training_loss(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        images, labels = batch
        return torch.nn.functional.cross_entropy(model(images).float(), labels)


def host_syncs_per_step(precision: str, track_skipped: bool = False) -> float:
    """Host syncs made inside the step function, per step, through warm-up and the timed loop."""
    torch.manual_seed(0)
    adapter = FakeQueueAdapter()
    device = Device(adapter, "fake", 0)
    workload = TinyClassifier()
    model = workload.build_model()
    step = make_train_step(workload, model, workload.make_optimizer(model), device,
                           get_precision(precision), track_skipped=track_skipped)
    counter = HostSyncCounter(adapter)
    steps = []

    def counted(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        steps.append(1)
        counter.enabled = True
        try:
            return step(batch)
        finally:
            counter.enabled = False  # the loop's own check after its window's sync is free

    counter.enabled = False
    with counter:
        StepLoop(counted, workload.make_batches("train", 8, DataOptions()), device).run(
            StopRule("steps", STEPS), WARMUP)
    # Per step run: the loop also runs calibration windows on an asynchronous device (warm-up).
    return counter.count / len(steps)


def plain_amp_recipe_syncs_per_step() -> float:
    """PyTorch's own AMP recipe makes one: GradScaler.step checks found_inf with .item() (a
    fused optimiser avoids it; a plain loop with Adadelta pays it too)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.Adadelta(model.parameters())
    scaler = torch.amp.GradScaler("cpu")
    counter = HostSyncCounter()
    with counter:
        for _ in range(STEPS):
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(torch.randn(8, 4)).float().sum()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    return counter.count / STEPS


def test_amp_fp16_steps_make_no_host_sync_beyond_pytorchs_own_recipe() -> None:
    assert plain_amp_recipe_syncs_per_step() == 1
    # Tracking skipped steps reads the scale twice a step: that is what timed runs used to pay.
    assert host_syncs_per_step("amp-fp16", track_skipped=True) > 2.5
    assert host_syncs_per_step("amp-fp16") == plain_amp_recipe_syncs_per_step()


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
def test_steps_without_a_scaler_make_no_host_sync(precision: str) -> None:
    assert host_syncs_per_step(precision) == 0


def test_get_scale_is_never_called_in_timed_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = torch.amp.GradScaler.get_scale
    monkeypatch.setattr(torch.amp.GradScaler, "get_scale",
                        lambda self: calls.append(1) or original(self))
    host_syncs_per_step("amp-fp16")
    assert calls == []


def test_parity_tracking_still_names_the_skipped_steps() -> None:
    torch.manual_seed(0)
    device = Device(FakeQueueAdapter(), "fake", 0)
    workload = TinyClassifier()
    model = workload.build_model()
    step = make_train_step(workload, model, workload.make_optimizer(model), device,
                           get_precision("amp-fp16"), track_skipped=True)
    images, labels = next(iter(workload.make_batches("train", 8, DataOptions())))
    step((images, labels))
    step((torch.full_like(images, float("inf")), labels))  # inf gradients: the scaler skips
    assert step.skipped == [2]
