"""What a subcommand plugs into the driver: its per-case work, a :class:`CaseWork`.

A work says how to run one case in this process (``inline``), how to describe it to another
process (``spec``: a typed :class:`~accelbench.engine.spec.CaseSpec` naming the subcommand's own
worker function, ``module:function``), and the result that names the case before anything ran
(what a crash, a timeout or an interruption is recorded on). Which launcher runs it (inline, a
worker process, torchrun: ``engine/launchers/``) is the work's ``launcher``, by default the one its
``isolation`` names; the work itself does not change with it.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from accelbench.engine.launchers.base import Launcher, Progress
from accelbench.options import DEFAULT_CASE_TIMEOUT_S
from accelbench.results import CaseResult, RunRecord

if TYPE_CHECKING:  # the spec's case imports torch; the driver only passes specs on
    from accelbench.engine.spec import CaseSpec

Item = TypeVar("Item")


def launcher_for(isolation: str, timeout: float, echo: bool = False) -> Launcher:
    """The launcher ``--isolation`` names: "process" (a worker process per case) or "none"."""
    from accelbench.engine.launchers.inline import InlineLauncher
    from accelbench.engine.launchers.process import ProcessLauncher

    return ProcessLauncher(timeout, echo) if isolation == "process" else InlineLauncher()


class CaseWork(ABC, Generic[Item]):
    """A subcommand's per-case work, plugged into the driver (see ``engine.driver.drive``)."""

    #: The subcommand's function that runs one case in another process, as ``module:function``
    #: (called with the :class:`CaseSpec` and a Report); empty for work that runs only inline.
    worker: ClassVar[str] = ""
    #: "process": each case in a worker process; "none": inline, in this process.
    isolation: str = "none"
    timeout: float = DEFAULT_CASE_TIMEOUT_S
    #: Write the worker's stderr to ours as it comes (--debug).
    echo: bool = False
    #: Another launcher than ``isolation``'s (a TorchrunLauncher: each case's ranks under
    #: torchrun); None takes ``isolation``'s.
    launcher: Launcher | None = None
    #: With isolation "process": consecutive cases on a device share one warm worker process
    #: (engine/launchers/warm.py), held by ``launching`` from the plan's first case to its last.
    warm: bool = False

    @abstractmethod
    def label(self, item: Item) -> str:
        """The case in words, for the progress display."""

    @abstractmethod
    def skeleton(self, item: Item) -> CaseResult:
        """The result that names the case before anything ran."""

    @abstractmethod
    def inline(self, item: Item, progress: Progress | None) -> CaseResult:
        """Run the case in this process; every exception the work can raise becomes a status."""

    def spec(self, item: Item) -> CaseSpec:
        """The case for another process (the worker function runs it from this)."""
        raise NotImplementedError(f"{type(self).__name__} runs only inline")

    def interrupted(self, item: Item, error: str) -> Any:
        """What the record keeps of a case a signal stopped (None: nothing)."""
        result = self.skeleton(item)
        result.status, result.error = "interrupted", error
        return result

    def collection(self, record: RunRecord) -> list[Any]:
        """The list of the record this work's results go to (a probe's go to ``record.probes``)."""
        return record.cases

    def next_round(self, item: Item, first: CaseResult) -> Item:
        """The item a later repeat runs, given the first round's result."""
        return item

    @contextlib.contextmanager
    def launching(self, items: Sequence[Item]) -> Iterator[None]:
        """Around a whole plan of ``items``. A warm work's cases share the launcher held here:
        the worker of the first case starts at once (its start-up overlaps what the caller does
        before that case), every worker ends with the block. Any other work launches each case
        on its own, and an entered block (or a launcher set by hand) is used as it is."""
        if not (self.warm and self.isolation == "process" and self.launcher is None and items):
            yield
            return
        from accelbench.engine.launchers.warm import WarmLauncher

        launcher = WarmLauncher(self.timeout, self.worker, self.echo)
        self.launcher = launcher
        try:
            launcher.prestart(self.spec(items[0]))
            yield
        finally:
            self.launcher = None
            launcher.close()

    def run(self, item: Item, progress: Progress | None) -> CaseResult:
        """One case through the work's launcher."""
        launcher = self.launcher or launcher_for(self.isolation, self.timeout, self.echo)
        result: CaseResult = launcher.launch(self, item, progress)
        return result
