"""The launchers' one protocol, what they launch, and what a case's work reports to whoever
launched it.

A :class:`Launcher` takes a subcommand's work (a :class:`Work`: ``engine/work.py``'s
``CaseWork`` is one, defined above the launchers, which never import it) and one of its items,
runs it, passes on its progress, and returns its typed result: the case's
``CaseResult`` (a probe's ``DeviceProbe``), whichever way it ended. Inside the work, a
:class:`Report` carries progress and partial results back: to a callback inline, as lines on
stdout from a worker process or a torchrun rank, where the launcher reads them.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # the spec imports torch; a launcher passes it on
    from accelbench.engine.spec import CaseSpec
    from accelbench.results import CaseResult, DeviceProbe

#: A case's progress: (phase, done, total or None).
Progress = Callable[[str, float, "float | None"], None]
Item = TypeVar("Item")

#: A worker's or rank's stdout line that carries progress, not output.
PROGRESS_PREFIX = "@@accelbench-progress "
#: A warm worker's stdout line that says the case it was given is done (warm.py).
DONE_PREFIX = "@@accelbench-done"


class Work(Protocol):
    """What a launcher launches: a subcommand's per-case work, as far as a launcher sees it."""

    @property
    def worker(self) -> str:
        """The subcommand's function that runs one case in another process, as ``module:function``
        (a class attribute of each work; read only)."""

    def skeleton(self, item: Any) -> Any:
        """The result that names the case before anything ran."""

    def inline(self, item: Any, progress: Progress | None) -> Any:
        """Run the case in this process."""

    def spec(self, item: Any) -> CaseSpec:
        """The case for another process."""


class Launcher(Protocol):
    """Runs one item of a work and returns its result; every way a case can end (a crash, a
    timeout, a rank that failed) is the result's status, never an exception. KeyboardInterrupt
    and other BaseExceptions stop what it started and propagate."""

    #: "inline", "process", "warm" or "torchrun".
    name: str

    def launch(self, work: Work, item: Any, progress: Progress | None) -> Any:
        ...


def print_progress(phase: str, done: float, total: float | None) -> None:
    """Progress as a line on stdout, for the launcher that reads this process's output."""
    print(PROGRESS_PREFIX + json.dumps([phase, done, total]), flush=True)


def progress_line(line: str, progress: Progress | None) -> bool:
    """Pass a progress line (``print_progress``) on to ``progress``: True when it was one."""
    if not line.startswith(PROGRESS_PREFIX):
        return False
    if progress is not None:
        phase, done, total = json.loads(line[len(PROGRESS_PREFIX):])
        progress(phase, done, total)
    return True


class Report:
    """What a case's work tells its launcher while it runs: ``progress`` (to ``on_progress``), and
    partial results (what finished so far) in ``result_path``, which a process launcher reads if
    the worker dies."""

    def __init__(self, on_progress: Progress | None = None, result_path: Path | None = None) -> None:
        self.on_progress, self.result_path = on_progress, result_path

    def progress(self, phase: str, done: float, total: float | None) -> None:
        if self.on_progress is not None:
            self.on_progress(phase, done, total)

    def partial(self, result: CaseResult | DeviceProbe) -> None:
        if self.result_path is None:
            return
        from accelbench.files import write_atomic

        write_atomic(self.result_path, json.dumps(result.to_dict()))


WorkFunction = Callable[["CaseSpec", Report], Any]


def worker_function(work: str) -> WorkFunction:
    """The function a spec's ``work`` names (``module:function``, inside accelbench): each
    subcommand names its own, so the launchers know none of them, and a worker imports only the
    one module it needs."""
    module, colon, name = work.partition(":")
    if not colon or not name or not module.startswith("accelbench."):
        raise ValueError(f"a worker function is 'accelbench.MODULE:FUNCTION', not {work!r}")
    function: WorkFunction = getattr(importlib.import_module(module), name)
    return function
