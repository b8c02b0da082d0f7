"""The MNIST workload is pytorch/examples' network, and real IDX files load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from idx import write_idx, write_tiny_mnist

from accelbench.data.mnist import load_mnist, read_idx
from accelbench.data.options import DataOptions
from accelbench.devices import DeviceSet
from accelbench.engine.case import Case
from accelbench.engine.measure_case import run_case
from accelbench.errors import UsageError
from accelbench.options import RunOptions, StopRule
from accelbench.workloads import get_workload_class


def test_model_is_the_pytorch_examples_network() -> None:
    workload = get_workload_class("mnist")()
    model = workload.build_model()
    # conv1 320 + conv2 18,496 + fc1 1,179,776 + fc2 1,290 parameters.
    assert sum(p.numel() for p in model.parameters()) == 1_199_882
    assert isinstance(workload.make_optimizer(model), torch.optim.Adadelta)
    assert workload.make_optimizer(model).defaults["lr"] == 1.0
    assert workload.batch_size("train") == 64 and workload.batch_size("eval") == 1000
    assert workload.samples_per_epoch("train") == 60_000
    assert workload.samples_per_epoch("eval") == 10_000
    out = model.eval()(torch.zeros(2, 1, 28, 28))
    assert out.shape == (2, 10)
    assert torch.allclose(out.exp().sum(1), torch.ones(2))  # log-softmax


def test_synthetic_batches_have_mnist_shapes_and_range() -> None:
    epoch = get_workload_class("mnist")().make_batches("train", 64, DataOptions())
    batches = list(epoch)
    assert len(batches) == 938 and len(batches[-1][0]) == 60_000 - 937 * 64
    images, labels = batches[0]
    assert images.shape == (64, 1, 28, 28) and labels.max() <= 9
    assert images.min() >= (0 - 0.1307) / 0.3081 - 1e-5 and images.max() <= (1 - 0.1307) / 0.3081 + 1e-5


@pytest.mark.parametrize("compress", [False, True])
def test_idx_files_load_normalised(tmp_path: Path, compress: bool) -> None:
    write_tiny_mnist(tmp_path, compress=compress)
    images, labels = load_mnist(tmp_path, "train")
    assert images.shape == (40, 1, 28, 28) and labels.shape == (40,)
    raw = read_idx(next((tmp_path / "MNIST" / "raw").glob("train-images*")))
    assert torch.allclose(images[0, 0], (torch.from_numpy(raw[0].astype(np.float32)) / 255 - 0.1307) / 0.3081)


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="train-images-idx3-ubyte, train-labels-idx1-ubyte"):
        load_mnist(tmp_path, "train")


def test_truncated_and_foreign_files(tmp_path: Path) -> None:
    write_tiny_mnist(tmp_path)
    images = tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:500])
    with pytest.raises(UsageError, match="truncated"):
        load_mnist(tmp_path, "train")
    images.write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(UsageError, match="not an IDX file"):
        load_mnist(tmp_path, "train")


def test_disagreeing_files_are_an_error(tmp_path: Path) -> None:
    write_tiny_mnist(tmp_path)
    write_idx(tmp_path / "MNIST" / "raw" / "train-labels-idx1-ubyte", np.zeros(3))
    with pytest.raises(UsageError, match="disagree"):
        load_mnist(tmp_path, "train")


def test_real_data_case_runs_over_the_files(tmp_path: Path) -> None:
    write_tiny_mnist(tmp_path)
    cpu = DeviceSet.current().select("cpu")[0]
    options = RunOptions(data="real", data_dir=tmp_path, stop=StopRule("epochs", 1), warmup_steps=1)
    result = run_case(Case(workload="mnist", mode="train", device=cpu, batch_size=16), options)
    assert result.status == "ok", result.error
    assert result.dataset_size == 40 and result.steps_per_epoch == 3
    assert result.measured_steps == 3 and len(result.epoch_times) == 1
    assert result.epoch_time()[3] == "measured"


def test_mnist_and_the_vae_read_real_data_through_the_workload_hook(tmp_path: Path) -> None:
    """Issue 35: one real-data hook on Workload (``real_data``; ``check_data`` and ``epoch`` use
    it): MNIST's normalised images, the VAE's the same files as [0, 1] pixels; a folder without
    the files is refused before a case runs."""
    write_tiny_mnist(tmp_path)
    real = DataOptions(kind="real", data_dir=tmp_path)
    mnist, vae = get_workload_class("mnist")("tiny"), get_workload_class("vae")("tiny")
    images, labels = next(iter(mnist.make_batches("train", 40, real)))
    pixels, same_labels = next(iter(vae.make_batches("train", 40, real)))
    assert images.shape == pixels.shape == (40, 1, 28, 28) and images.min() < 0
    assert float(pixels.min()) >= 0.0 and float(pixels.max()) <= 1.0
    assert len(labels) == len(same_labels) == 40
    for workload in (mnist, vae):
        workload.check_data("train", real)  # the files are there
        with pytest.raises(UsageError):
            workload.check_data("train", DataOptions(kind="real", data_dir=tmp_path / "none"))
