"""Importing this module registers every built-in workload."""

from accelbench.workloads import mnist  # noqa: F401
