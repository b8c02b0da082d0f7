"""An epoch of batches as the run asks for it: a real data set's tensors in a DataLoader (with the
run's worker and pinning settings), or a synthetic pool. Workloads name their data; which of the
two an epoch is, is decided here once."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from accelbench.data.options import DataOptions
from accelbench.data.synthetic import Batch, synthetic_epoch


def real_data_dir(options: DataOptions) -> Path | None:
    """The folder to read a real data set from, or None when the run uses synthetic data."""
    if options.kind != "real":
        return None
    assert options.data_dir is not None  # the options refuse --data real without --data-dir
    return options.data_dir


def epoch_batches(options: DataOptions, batch_size: int, *,
                  real: Callable[[Path], tuple[torch.Tensor, ...]],
                  synthetic: Callable[[torch.Generator, int], Batch], dataset_size: int,
                  shuffle: bool, seed_offset: int = 0) -> Iterable[Batch]:
    """``real(folder)``'s tensors in a DataLoader when the run reads real data (read only then);
    otherwise ``dataset_size`` synthetic samples made by ``synthetic`` from the run's seed (plus
    ``seed_offset``, for a split that must not repeat another's samples)."""
    folder = real_data_dir(options)
    if folder is not None:
        return _tensor_loader(real(folder), batch_size, options, shuffle)
    return synthetic_epoch(synthetic, dataset_size, batch_size, options.seed + seed_offset)


def _tensor_loader(
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
