"""Workloads: the contract (base.py), a leaf registry of names (registry.py), one resolver
from any name to a class (catalogue.py), one file per built-in workload, and the named-model
adapters (named/).

The names below are loaded on first use (``base`` and the catalogue import torch), so code that
needs only ``SIZES``/``MODES`` or the registry (option parsing) starts without torch.
"""

from __future__ import annotations

from typing import Any

from accelbench.workloads.presets import MODES, SIZES, Preset

_FROM_BASE = ("Workload", "register")
_FROM_CATALOGUE = ("get_workload_class", "load_workload_file", "match_workloads", "workload_names")

__all__ = ["MODES", "SIZES", "Preset", *_FROM_BASE, *_FROM_CATALOGUE]


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from accelbench.workloads import base

        return getattr(base, name)
    if name in _FROM_CATALOGUE:
        from accelbench.workloads import catalogue

        return getattr(catalogue, name)
    raise AttributeError(f"module 'accelbench.workloads' has no attribute {name!r}")
