"""CIFAR-10: the real data set in torchvision's python-pickle layout, and CIFAR-like synthetic batches.

Real data is looked for in ``DIR/cifar-10-batches-py/`` (what ``torchvision.datasets.CIFAR10``
downloads) and, failing that, in ``DIR/`` itself. The files are pickles because that is the data
set's official distribution format. Unpickling can run arbitrary code, so the unpickler here only
resolves the few numpy names a CIFAR-10 batch needs and refuses everything else.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from accelbench.errors import UsageError

FOLDER = "cifar-10-batches-py"
FILES = {
    "train": tuple(f"data_batch_{i}" for i in range(1, 6)),
    "eval": ("test_batch",),
}
NUM_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
_ROW = 3 * 32 * 32

# What numpy needs to rebuild an array from a pickle (numpy 1.x and 2.x module names), and the
# string-to-bytes helper Python 3 writes for bytes at protocols 0-2.
_ALLOWED = {
    ("_codecs", "encode"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not part of a CIFAR-10 batch")
        return super().find_class(module, name)


def find_folder(data_dir: Path) -> Path:
    nested = data_dir / FOLDER
    return nested if nested.is_dir() else data_dir


def missing_files(data_dir: Path, mode: str) -> list[str]:
    folder = find_folder(data_dir)
    return [name for name in FILES[mode] if not (folder / name).is_file()]


def _check_present(data_dir: Path, mode: str) -> Path:
    missing = missing_files(data_dir, mode)
    if missing:
        raise UsageError(
            f"--data real: CIFAR-10 files missing under {data_dir}: {', '.join(missing)} "
            f"(expected torchvision's layout DIR/{FOLDER}/<file>)"
        )
    return find_folder(data_dir)


def read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 batch file: images (N, 3, 32, 32) uint8 and labels (N,) int64."""
    try:
        with open(path, "rb") as handle:
            entry = _NumpyOnlyUnpickler(handle, encoding="bytes").load()
    except FileNotFoundError:
        raise UsageError(f"CIFAR-10 file {path} does not exist") from None
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError,
            IndexError, KeyError) as error:
        raise UsageError(f"cannot read CIFAR-10 file {path} (truncated or not a CIFAR-10 batch?): "
                         f"{type(error).__name__}: {error}") from None
    if not isinstance(entry, dict) or b"data" not in entry or b"labels" not in entry:
        raise UsageError(f"{path} is not a CIFAR-10 batch: expected a dict with b'data' and b'labels'")
    data, labels = np.asarray(entry[b"data"]), np.asarray(entry[b"labels"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _ROW:
        raise UsageError(f"{path}: b'data' must be uint8 of shape (N, {_ROW}), "
                         f"found {data.dtype} {data.shape}")
    if labels.ndim != 1 or len(labels) != len(data):
        raise UsageError(f"{path}: {len(data)} images but labels of shape {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
        raise UsageError(f"{path}: labels must lie in 0..{NUM_CLASSES - 1}, "
                         f"found {labels.min()}..{labels.max()}")
    return data.reshape(-1, *IMAGE_SHAPE), labels.astype(np.int64)


def load_cifar10(data_dir: Path, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Images (N, 3, 32, 32) uint8 and labels (N,) int64: the 50,000 training or 10,000 test images."""
    folder = _check_present(data_dir, mode)
    parts = [read_batch(folder / name) for name in FILES[mode]]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    return torch.from_numpy(images), torch.from_numpy(labels)


def check_cifar10(data_dir: Path, mode: str) -> None:
    """Fail before any case runs when a file is missing (reading all of them is left to the run)."""
    _check_present(data_dir, mode)


def cifar_like_batch(generator: torch.Generator, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 pixels as CIFAR-10 stores them, and 10 classes."""
    images = torch.randint(0, 256, (batch_size, *IMAGE_SHAPE), generator=generator, dtype=torch.uint8)
    labels = torch.randint(0, NUM_CLASSES, (batch_size,), generator=generator)
    return images, labels
