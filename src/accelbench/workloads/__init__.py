"""Workloads: one file each, registered where defined with ``@register``."""

from accelbench.workloads.base import (
    DataOptions,
    Workload,
    get_workload_class,
    match_workloads,
    register,
    workload_names,
)
from accelbench.workloads.presets import SIZES, Preset

__all__ = [
    "SIZES", "DataOptions", "Preset", "Workload", "get_workload_class", "match_workloads", "register",
    "workload_names",
]
