"""accelbench: how fast does this machine train and evaluate PyTorch models on each device?"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["DataOptions", "RunOptions", "StopRule", "Workload", "__version__", "bench",
           "list_workloads", "register", "run", "sweep"]

_LAZY = {
    "run": "accelbench.api",
    "bench": "accelbench.api",
    "sweep": "accelbench.api",
    "list_workloads": "accelbench.api",
    "Workload": "accelbench.workloads.base",
    "DataOptions": "accelbench.data.options",
    "register": "accelbench.workloads.base",
    "RunOptions": "accelbench.options",
    "StopRule": "accelbench.measure.loop.stop",
}


def __getattr__(name: str) -> Any:
    # Imported on first use, so `import accelbench` (and commands that never run a model) do
    # not pay for importing torch.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'accelbench' has no attribute {name!r}")
