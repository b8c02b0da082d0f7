"""Where a workload's batches come from: the data settings a run hands every workload."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DataOptions:
    """Where a workload's batches come from."""

    kind: str = "synthetic"  # "synthetic" or "real"
    data_dir: Path | None = None
    seed: int = 0
    workers: int = 0
    pin_memory: bool = False
