"""What every named model shares: an optional library imported with a clear error, and a
workload version that changes with the library's version (a model's definition lives there)."""

from __future__ import annotations

import importlib
import re
from types import ModuleType

from accelbench.errors import UsageError

#: The default batch of a named model at its published size (timm's and torchvision's reference
#: scripts train at 64-256 per device; 64 fits a 2-core CPU and a small GPU alike).
PUBLISHED_BATCH = {"train": 64, "eval": 64}
TINY_BATCH = {"train": 2, "eval": 2}
TINY_SAMPLES = {"train": 4, "eval": 4}


def import_library(module: str, prefix: str, extra: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise UsageError(f"models named {prefix}:... need the optional '{module}' package "
                         f"({error}); install it with: pip install 'accelbench[{extra}]'") from None


def version_number(version: str) -> int:
    """``"1.0.31"`` -> 1000031: an integer workload version that differs whenever the library's
    major, minor or patch version does, so results from two library versions never compare."""
    parts = [int(p) for p in re.findall(r"\d+", version)[:3]] + [0, 0, 0]
    return parts[0] * 1_000_000 + parts[1] * 1_000 + parts[2]
