"""Real MNIST from IDX files in torchvision's folder layout.

Looked for, in order: ``DIR/MNIST/raw/``, ``DIR/raw/`` and ``DIR/``; each file may be gzipped.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import torch
from numpy.typing import DTypeLike

from accelbench.errors import UsageError

FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "eval": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
MEAN, STD = 0.1307, 0.3081
_DTYPES: dict[int, DTypeLike] = {
    0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8",
}


def _find(data_dir: Path, stem: str) -> Path | None:
    for folder in (data_dir / "MNIST" / "raw", data_dir / "raw", data_dir):
        for name in (stem, stem + ".gz"):
            if (folder / name).is_file():
                return folder / name
    return None


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (the format of LeCun's MNIST distribution)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            data = handle.read()
    except (OSError, EOFError) as error:
        raise UsageError(f"cannot read MNIST file {path}: {error}") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise UsageError(f"{path} is not an IDX file (bad magic number)")
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise UsageError(f"{path} is truncated: its header is incomplete")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = np.dtype(_DTYPES[data[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header < expected:
        raise UsageError(
            f"{path} is truncated: shape {shape} needs {expected} bytes, found {len(data) - header}"
        )
    return np.frombuffer(data, dtype=dtype, count=int(np.prod(shape)), offset=header).reshape(shape)


def load_mnist(data_dir: Path, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalised images (N, 1, 28, 28) float32 and labels (N,) int64 for ``mode``."""
    stems = FILES[mode]
    paths = [_find(data_dir, stem) for stem in stems]
    missing = [stem for stem, path in zip(stems, paths, strict=True) if path is None]
    if missing:
        raise UsageError(
            f"--data real: MNIST files missing under {data_dir}: {', '.join(missing)} "
            "(expected torchvision's layout DIR/MNIST/raw/<file>[.gz])"
        )
    image_path, label_path = paths
    assert image_path is not None and label_path is not None  # none missing, checked above
    images = read_idx(image_path)
    labels = read_idx(label_path)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise UsageError(
            f"MNIST files under {data_dir} disagree: images {images.shape}, labels {labels.shape}"
        )
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return (x - MEAN) / STD, torch.from_numpy(labels.astype(np.int64))
