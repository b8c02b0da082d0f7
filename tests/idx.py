"""Write tiny IDX files (MNIST's format) for tests."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

PREFIXES = {"train": "train", "eval": "t10k"}


def write_idx(path: Path, array: np.ndarray, compress: bool = False) -> Path:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I",
                                                                          *array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if compress:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def write_tiny_mnist(root: Path, n_train: int = 40, n_eval: int = 20, compress: bool = False) -> Path:
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for mode, n in (("train", n_train), ("eval", n_eval)):
        prefix = PREFIXES[mode]
        write_idx(raw / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)), compress)
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, (n,)), compress)
    return root
