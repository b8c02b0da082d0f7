"""CIFAR-10 in torchvision's python-pickle layout: reading, validation, refusal of foreign pickles."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from accelbench.data.cifar import FILES, FOLDER, cifar_like_batch, load_cifar10, read_batch
from accelbench.data.options import DataOptions
from accelbench.errors import UsageError
from accelbench.workloads import get_workload_class

PER_FILE = 3


def write_cifar(root: Path, protocol: int = 2, per_file: int = PER_FILE) -> Path:
    """Batches shaped like the real ones: b'data' uint8 (N, 3072), b'labels' a list of ints."""
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name in FILES["train"] + FILES["eval"]:
        entry = {b"batch_label": name.encode(), b"labels": [int(v) for v in rng.integers(0, 10, per_file)],
                 b"data": rng.integers(0, 256, (per_file, 3072), dtype=np.uint8)}
        with open(folder / name, "wb") as handle:
            pickle.dump(entry, handle, protocol=protocol)
    return root


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_reads_train_and_test_batches(tmp_path: Path, protocol: int) -> None:
    write_cifar(tmp_path, protocol)
    images, labels = load_cifar10(tmp_path, "train")
    assert images.shape == (5 * PER_FILE, 3, 32, 32) and images.dtype == torch.uint8
    assert labels.shape == (5 * PER_FILE,) and labels.dtype == torch.int64
    with open(tmp_path / FOLDER / "data_batch_1", "rb") as handle:
        raw = pickle.load(handle, encoding="bytes")
    # row layout is 1024 red, 1024 green, 1024 blue values, each 32x32 row-major
    assert torch.equal(images[0, 1, 0, :], torch.from_numpy(raw[b"data"][0, 1024:1056]))
    assert labels[:PER_FILE].tolist() == raw[b"labels"]
    test_images, _ = load_cifar10(tmp_path, "eval")
    assert test_images.shape[0] == PER_FILE


def test_the_folder_itself_may_be_given(tmp_path: Path) -> None:
    write_cifar(tmp_path)
    images, _ = load_cifar10(tmp_path / FOLDER, "eval")
    assert images.shape == (PER_FILE, 3, 32, 32)


def test_missing_file_is_named(tmp_path: Path) -> None:
    write_cifar(tmp_path)
    (tmp_path / FOLDER / "data_batch_3").unlink()
    with pytest.raises(UsageError, match="data_batch_3") as caught:
        load_cifar10(tmp_path, "train")
    assert "data_batch_1" not in str(caught.value)
    with pytest.raises(UsageError, match="test_batch"):
        load_cifar10(tmp_path / "elsewhere", "eval")


def test_truncated_file_is_a_clear_error(tmp_path: Path) -> None:
    write_cifar(tmp_path)
    path = tmp_path / FOLDER / "test_batch"
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(UsageError, match=r"cannot read CIFAR-10 file .*test_batch.*truncated"):
        load_cifar10(tmp_path, "eval")


def test_wrong_shapes_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad"
    with open(path, "wb") as handle:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, handle)
    with pytest.raises(UsageError, match=r"shape \(N, 3072\)"):
        read_batch(path)
    with open(path, "wb") as handle:
        pickle.dump({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}, handle)
    with pytest.raises(UsageError, match="2 images but labels"):
        read_batch(path)
    with open(path, "wb") as handle:
        pickle.dump({b"data": np.zeros((1, 3072), np.uint8), b"labels": [10]}, handle)
    with pytest.raises(UsageError, match=r"0\.\.9"):
        read_batch(path)


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_a_pickle_that_would_run_code_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil"
    with open(path, "wb") as handle:
        pickle.dump({b"data": _Exploit(), b"labels": []}, handle)
    with pytest.raises(UsageError, match="refusing to load"):
        read_batch(path)
    assert not (tmp_path / "pwned").exists()


def test_simclr_reads_real_cifar_and_checks_both_splits_for_training(tmp_path: Path) -> None:
    write_cifar(tmp_path)
    workload = get_workload_class("simclr-resnet18")()
    options = DataOptions(kind="real", data_dir=tmp_path)
    workload.check_data("train", options)
    images, labels = next(iter(workload.make_batches("eval", 2, options)))
    assert images.shape == (2, 3, 32, 32) and images.dtype == torch.uint8 and labels.shape == (2,)
    (tmp_path / FOLDER / "test_batch").unlink()
    with pytest.raises(UsageError, match="test_batch"):
        workload.check_data("train", options)  # the kNN evaluation at each epoch's end needs it


def test_synthetic_batches_look_like_cifar() -> None:
    images, labels = cifar_like_batch(torch.Generator().manual_seed(0), 64)
    assert images.dtype == torch.uint8 and images.shape == (64, 3, 32, 32)
    assert int(images.max()) > 200 and int(images.min()) < 50
    assert labels.min() >= 0 and labels.max() <= 9
    again, _ = cifar_like_batch(torch.Generator().manual_seed(0), 64)
    assert torch.equal(images, again)
