"""DataLoaders over in-memory real data sets, with the worker and pinning settings of a run."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from accelbench.data.options import DataOptions


def tensor_loader(
    tensors: tuple[torch.Tensor, ...], batch_size: int, options: DataOptions, shuffle: bool
) -> DataLoader:
    generator = torch.Generator().manual_seed(options.seed)
    return DataLoader(
        TensorDataset(*tensors),
        batch_size=batch_size,
        shuffle=shuffle,
        num_workers=options.workers,
        pin_memory=options.pin_memory,
        generator=generator,
        persistent_workers=options.workers > 0,
    )
