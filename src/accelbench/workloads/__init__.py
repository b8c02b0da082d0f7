"""Workloads: one file each, registered where defined with ``@register``.

The names from ``base`` are loaded on first use (``base`` imports torch), so code that needs only
``SIZES``/``MODES`` (option parsing) starts without torch.
"""

from __future__ import annotations

from typing import Any

from accelbench.workloads.presets import MODES, SIZES, Preset

_FROM_BASE = ("DataOptions", "Workload", "get_workload_class", "match_workloads", "register",
              "workload_names")

__all__ = ["MODES", "SIZES", "Preset", *_FROM_BASE]


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from accelbench.workloads import base

        return getattr(base, name)
    raise AttributeError(f"module 'accelbench.workloads' has no attribute {name!r}")
