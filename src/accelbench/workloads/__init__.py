"""Workloads: one file each, registered where defined with ``@register``."""

from accelbench.workloads.base import (
    DataOptions,
    Workload,
    get_workload_class,
    match_workloads,
    register,
    workload_names,
)

__all__ = [
    "DataOptions", "Workload", "get_workload_class", "match_workloads", "register",
    "workload_names",
]
