"""accelbench: how fast does this machine train and evaluate PyTorch models on each device?"""

__version__ = "0.1.0"

from accelbench.api import list_workloads, run  # noqa: E402
from accelbench.workloads.base import DataOptions, Workload, register  # noqa: E402

__all__ = ["DataOptions", "Workload", "__version__", "list_workloads", "register", "run"]
