"""Where a case's batches live while it is timed.

``--data synthetic`` (the default) gives host batches that every step copies to the device, as a
DataLoader gives them; on devices where page-locked memory speeds the copy up (CUDA, XPU: the
adapter's ``pin_memory``) the pool is pinned, so ``non_blocking=True`` copies really overlap.
``--data synthetic-device`` keeps the pool on the device: no copy at all, pure compute, as timm's
and TorchBench's benchmarks measure. ``--data real`` is a DataLoader over a data set on disk,
pinned by the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from accelbench.data.synthetic import EpochBatches
from accelbench.devices import Device

#: The kind of data a workload is asked to make for each --data mode (placement is ours).
_SOURCE = {"synthetic": "synthetic", "synthetic-device": "synthetic", "real": "real"}


def source_kind(data_mode: str) -> str:
    """The ``DataOptions.kind`` a workload sees for a --data mode."""
    return _SOURCE[data_mode]


def place_batches(batches: Iterable[Any], data_mode: str, device: Device) -> Iterable[Any]:
    """The workload's synthetic pool pinned or moved to the device as ``data_mode`` says."""
    if data_mode == "real":
        return batches  # the DataLoader pins (DataOptions.pin_memory)
    if not isinstance(batches, EpochBatches):
        if data_mode == "synthetic-device":
            raise NotImplementedError(
                "--data synthetic-device is not supported by this workload: it makes its own "
                "batches instead of using accelbench.data.synthetic.synthetic_epoch")
        return batches
    if data_mode == "synthetic-device":
        def move(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.to(device.torch_device)
    elif device.pin_memory:  # the adapter knows whether page-locking helps
        def move(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.pin_memory()
    else:
        return batches
    pool = [tuple(move(tensor) for tensor in batch) for batch in batches.pool]
    return EpochBatches(pool, batches.dataset_size, batches.batch_size)
