"""Where a case's batches live while it is timed.

``--data synthetic`` (the default) gives host batches that every step copies to the device, as a
DataLoader gives them; on devices where page-locked memory speeds the copy up (CUDA, XPU: the
adapter's ``pin_memory``) the pool is pinned, so ``non_blocking=True`` copies really overlap.
``--data synthetic-device`` keeps the pool on the device: no copy at all, pure compute, as timm's
and TorchBench's benchmarks measure. ``--data real`` is a DataLoader over a data set on disk,
pinned by the same rule.

The device-resident pool occupies device memory for the whole case (4 batches: about 0.6 GB for
ResNet-50 at batch 256), which the other modes keep in host memory. So that both modes report the
same peak for the same model, the runner sets :func:`device_pool_bytes` aside from the device's
peak and says so beside the figure (``measure/trackers/region.MemoryTracker.set_aside``).
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


#: How the set-aside pool is named beside the peak it was taken from.
POOL_LABEL = "the device-resident batch pool (--data synthetic-device)"


def device_pool_bytes(batches: Iterable[Any], data_mode: str, device: Device) -> int:
    """Bytes of the batch pool held in the device's memory for the whole case: the
    ``--data synthetic-device`` pool on an accelerator, each storage once; 0 otherwise (on the CPU
    every mode's pool is host memory, counted alike)."""
    if data_mode != "synthetic-device" or device.is_cpu or not isinstance(batches, EpochBatches):
        return 0
    storages = {tensor.untyped_storage().data_ptr(): tensor.untyped_storage().nbytes()
                for batch in batches.pool for tensor in batch}
    return sum(storages.values())
