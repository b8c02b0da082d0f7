"""Named sets of workloads that ``accelbench run`` runs when no workload is named."""

from __future__ import annotations

from accelbench.errors import UsageError

SUITES: dict[str, tuple[str, ...]] = {
    "quick": ("mnist",),
}
DEFAULT_SUITE = "quick"


def suite_workloads(name: str) -> tuple[str, ...]:
    if name == "full":
        from accelbench.workloads import workload_names

        return tuple(workload_names())
    try:
        return SUITES[name]
    except KeyError:
        raise UsageError(
            f"unknown suite {name!r}; allowed: {', '.join([*SUITES, 'full'])}"
        ) from None
