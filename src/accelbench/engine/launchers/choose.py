"""The one place a launcher is chosen (as optimum-benchmark's ``benchmark/base.py`` picks its
launcher from the launcher config and the scenario never picks its own).

What the options ask is a :class:`LaunchPlan`: the isolation (``none``: inline, in this process;
``process``: a worker process per case, or with ``warm`` one warm worker per device for the
whole plan, or with ``resume`` a fresh worker going on after the piece a worker died in;
``torchrun``: each case as the world of ranks its work says), the case timeout and whether the
workers' output is echoed. :func:`launcher_for` turns it into the one launcher the driver hands
every case of a plan to (``engine/driver.py``); the work itself never sees the plan.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.options import DEFAULT_CASE_TIMEOUT_S

if TYPE_CHECKING:
    from accelbench.engine.launchers.base import Launcher, Work
    from accelbench.options import RunOptions

#: What ``--isolation`` may say.
ISOLATION_KINDS = ("none", "process", "torchrun")


@dataclass(frozen=True)
class LaunchPlan:
    """How the cases of a plan are launched (see the module docstring)."""

    isolation: str = "none"
    #: Seconds a case (a world of ranks, under torchrun) may take before it is killed.
    timeout: float = DEFAULT_CASE_TIMEOUT_S
    #: Write the workers' (torchrun's) output to stderr as it comes (--debug).
    echo: bool = False
    #: With "process": consecutive cases on a device share one warm worker process
    #: (launchers/warm.py), started with the plan's first case and ended with its last.
    warm: bool = False
    #: With "process": a worker that dies costs only the piece of its case it was in, and a
    #: fresh one goes on with the rest (launchers/process.py's ResumableWork: ``probe``).
    resume: bool = False
    #: The option that set ``timeout``, named when a world overruns it.
    timeout_flag: str = "--case-timeout"

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATION_KINDS:
            raise ValueError(f"isolation {self.isolation!r} is unknown; allowed: "
                             f"{', '.join(ISOLATION_KINDS)}")

    @classmethod
    def of_run(cls, options: RunOptions, *, warm: bool = False, echo: bool = False) -> LaunchPlan:
        """The plan ``run``'s and ``check``'s options ask for (``warm`` where the work shares a
        warm worker between cases)."""
        return cls(options.isolation, options.case_timeout_s, echo,
                   warm=warm and options.isolation == "process")


def one_launcher(plan: LaunchPlan) -> Launcher:
    """The launcher of one case that ``plan`` asks for (a warm one is held by ``launcher_for``)."""
    if plan.isolation == "torchrun":
        from accelbench.engine.launchers.torchrun import TorchrunLauncher

        return TorchrunLauncher(plan.timeout, plan.echo, plan.timeout_flag)
    if plan.isolation == "process":
        from accelbench.engine.launchers.process import ProcessLauncher

        return ProcessLauncher(plan.timeout, plan.echo, plan.resume)
    from accelbench.engine.launchers.inline import InlineLauncher

    return InlineLauncher()


@contextlib.contextmanager
def launcher_for(plan: LaunchPlan, work: Work, items: Sequence[Any]) -> Iterator[Launcher]:
    """The launcher every case of ``items`` goes through, held from the first case to the last.
    A warm plan's worker for the first case starts at once (its start-up overlaps what the
    caller does before that case), and every worker ends with the block."""
    if not (plan.warm and plan.isolation == "process" and items):
        yield one_launcher(plan)
        return
    from accelbench.engine.launchers.warm import WarmLauncher

    launcher = WarmLauncher(plan.timeout, work.worker, plan.echo)
    try:
        launcher.prestart(work.spec(items[0]))
        yield launcher
    finally:
        launcher.close()
