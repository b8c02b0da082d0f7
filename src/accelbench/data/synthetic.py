"""Deterministic synthetic data with the shapes and value ranges of the real data sets.

A small pool of distinct batches is generated once (fixed seed) and cycled, so generating data
costs nothing inside the timed loop, while an epoch still has the real number of steps and a
partial last batch, exactly as a DataLoader over the real data set would give.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

Batch = tuple[torch.Tensor, ...]
POOL_SIZE = 4


class EpochBatches:
    """Iterable over one epoch of ``dataset_size`` samples in batches of ``batch_size``."""

    def __init__(self, pool: list[Batch], dataset_size: int, batch_size: int) -> None:
        if not pool:
            raise ValueError("EpochBatches needs at least one batch in its pool")
        self.pool = pool
        self.dataset_size = dataset_size
        self.batch_size = batch_size

    def __len__(self) -> int:
        return -(-self.dataset_size // self.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        remaining = self.dataset_size
        step = 0
        while remaining > 0:
            batch = self.pool[step % len(self.pool)]
            take = min(self.batch_size, remaining)
            yield batch if take == self.batch_size else tuple(t[:take] for t in batch)
            remaining -= take
            step += 1


def synthetic_epoch(
    make_batch: Callable[[torch.Generator, int], Batch],
    dataset_size: int,
    batch_size: int,
    seed: int,
) -> EpochBatches:
    """Build the pool with ``make_batch(generator, batch_size)`` and wrap it as an epoch."""
    generator = torch.Generator().manual_seed(seed)
    pool_size = min(POOL_SIZE, -(-dataset_size // batch_size))
    pool = [make_batch(generator, batch_size) for _ in range(pool_size)]
    return EpochBatches(pool, dataset_size, batch_size)
