"""The one real-vs-synthetic dispatch (data/loader.py) that every workload with a real data set uses."""

from __future__ import annotations

from pathlib import Path

import torch

from accelbench.data.loader import epoch_batches, real_data_dir
from accelbench.data.options import DataOptions
from accelbench.data.synthetic import EpochBatches


def _ramp(generator: torch.Generator, batch_size: int) -> tuple[torch.Tensor, ...]:
    return (torch.rand(batch_size, 2, generator=generator),)


def test_synthetic_runs_never_read_the_real_data_and_take_the_seed_offset() -> None:
    def no_reading(folder: Path) -> tuple[torch.Tensor, ...]:
        raise AssertionError("read real data in a synthetic run")

    options = DataOptions(seed=3)
    epoch = epoch_batches(options, 4, real=no_reading, synthetic=_ramp, dataset_size=10, shuffle=True)
    assert isinstance(epoch, EpochBatches) and epoch.dataset_size == 10
    offset = epoch_batches(options, 4, real=no_reading, synthetic=_ramp, dataset_size=10,
                           shuffle=True, seed_offset=1)
    same = epoch_batches(DataOptions(seed=4), 4, real=no_reading, synthetic=_ramp, dataset_size=10,
                         shuffle=True)
    first = next(iter(offset))[0]
    assert torch.equal(first, next(iter(same))[0]) and not torch.equal(first, next(iter(epoch))[0])
    assert real_data_dir(options) is None


def test_real_runs_read_the_folder_into_a_loader_with_the_runs_settings(tmp_path: Path) -> None:
    read: list[Path] = []

    def real(folder: Path) -> tuple[torch.Tensor, ...]:
        read.append(folder)
        return torch.arange(10.0).unsqueeze(1), torch.arange(10)

    options = DataOptions(kind="real", data_dir=tmp_path, seed=1)
    loader = epoch_batches(options, 4, real=real, synthetic=_ramp, dataset_size=99, shuffle=False)
    batches = list(loader)
    assert read == [tmp_path] and real_data_dir(options) == tmp_path
    assert [len(b[0]) for b in batches] == [4, 4, 2]  # the real set's size, partial batch kept
    assert torch.equal(batches[0][1], torch.arange(4))
