"""What a subcommand plugs into the driver: its per-case work, a :class:`CaseWork`.

A work says how to run one case in this process (``inline``), how to describe it to another
process (``spec``: a typed :class:`~accelbench.engine.spec.CaseSpec` naming the subcommand's own
worker function, ``module:function``), and the result that names the case before anything ran
(what a crash, a timeout or an interruption is recorded on). It never chooses its launcher:
``engine/launchers/choose.py`` picks one from what the options ask, and the driver hands it to
:meth:`CaseWork.launch`. CaseWork sits above the launchers, which see it only through their own
protocol (``launchers/base.py``'s ``Work``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from accelbench.engine.launchers.base import Launcher, Progress
from accelbench.results import CaseResult, RunRecord

if TYPE_CHECKING:  # the spec's case imports torch; the driver only passes specs on
    from accelbench.engine.spec import CaseSpec

Item = TypeVar("Item")


class CaseWork(ABC, Generic[Item]):
    """A subcommand's per-case work, plugged into the driver (see ``engine.driver.drive``)."""

    #: The subcommand's function that runs one case in another process, as ``module:function``
    #: (called with the :class:`CaseSpec` and a Report); empty for work that runs only inline.
    worker: ClassVar[str] = ""

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

    def launch(self, launcher: Launcher, item: Item, progress: Progress | None) -> CaseResult:
        """One case through ``launcher`` (the one chosen for the plan); a work may launch a case
        more than once (``run --auto-batch``) or not at all (a workload that cannot run)."""
        result: CaseResult = launcher.launch(self, item, progress)
        return result
