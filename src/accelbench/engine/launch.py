"""The launcher axis: a subcommand's per-case work, run inline, in a worker process, or as ranks
under torchrun.

A subcommand plugs in a :class:`CaseWork`: how to run one case in this process, how to describe
it to a worker (a JSON spec), and the result that names the case before anything ran (what a
crash, a timeout or an interruption is recorded on). In a worker (``python -m accelbench.engine.worker
SPEC RESULT``) the spec's ``work`` names the subcommand's own function (``module:function``).
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from accelbench.engine.supervise import ChildOutcome, supervise
from accelbench.results import CaseResult, DeviceProbe, RunRecord

if TYPE_CHECKING:  # the spec's class imports torch; the launcher only passes specs on
    from accelbench.engine.case import WorkerSpec

#: A case's progress: (phase, done, total or None).
Progress = Callable[[str, float, "float | None"], None]
Item = TypeVar("Item")

PROGRESS_PREFIX = "@@accelbench-progress "
DEFAULT_CASE_TIMEOUT_S = 1800.0
ISOLATIONS = ("process", "none")
#: The third launcher's output: every rank's lines merged, the last ones kept.
TORCHRUN_TAIL_LINES = 200

def worker_function(work: str) -> Callable[[WorkerSpec, Report], Any]:
    """The function a spec's ``work`` names (``module:function``, inside accelbench): each
    subcommand names its own, so the engine knows none of them, and a worker imports only the
    one module it needs."""
    module, colon, name = work.partition(":")
    if not colon or not name or not module.startswith("accelbench."):
        raise ValueError(f"a worker function is 'accelbench.MODULE:FUNCTION', not {work!r}")
    return getattr(importlib.import_module(module), name)


class Report:
    """What a worker tells its parent while a case runs: progress lines on stdout, and partial
    results (what finished so far) in the result file, which the parent reads if the worker dies."""

    def __init__(self, result_path: Path) -> None:
        self.result_path = result_path

    def progress(self, phase: str, done: float, total: float | None) -> None:
        print(PROGRESS_PREFIX + json.dumps([phase, done, total]), flush=True)

    def partial(self, result: CaseResult | DeviceProbe) -> None:
        from accelbench.files import write_atomic

        write_atomic(self.result_path, json.dumps(result.to_dict()))


def worker_call(spec: WorkerSpec, timeout: float, progress: Progress | None,
                echo: bool = False) -> tuple[ChildOutcome, dict[str, Any] | None]:
    """Run ``work`` in a worker process: how it ended, and the result it left (complete when it
    exited 0, else the partial result it reported, or None).

    KeyboardInterrupt and other BaseExceptions stop the worker and propagate to the caller.
    """
    def on_line(line: str) -> bool:
        if line.startswith(PROGRESS_PREFIX) and progress is not None:
            phase, done, total = json.loads(line[len(PROGRESS_PREFIX):])
            progress(phase, done, total)
        return True  # stdout carries only messages for us; anything else there is dropped

    with tempfile.TemporaryDirectory(prefix="accelbench-case-") as folder:
        spec_path, result_path = Path(folder) / "spec.json", Path(folder) / "result.json"
        spec_path.write_text(spec.to_json())
        outcome = supervise([sys.executable, "-m", "accelbench.engine.worker", str(spec_path),
                             str(result_path)], timeout, on_line=on_line, echo=echo)
        data = json.loads(result_path.read_text()) if result_path.exists() else None
    return outcome, data


def torchrun_command(nproc: int, torchrun_args: list[str], spec_path: Path) -> list[str]:
    """torchrun starting ``nproc`` ranks per node, each ``python -m accelbench.engine.worker
    --rank SPEC``, which calls the spec's worker function (``torchrun_args``: the rendezvous)."""
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            *torchrun_args, "--max-restarts", "0",
            "-m", "accelbench.engine.worker", "--rank", str(spec_path)]


def in_torchrun(command: list[str], env: dict[str, str], timeout: float,
                echo: bool) -> ChildOutcome:
    """The third launcher, beside inline and a worker process: torchrun under the shared
    supervisor; its output (every rank's) merged into one tail; at the timeout torchrun and
    every rank under it are killed."""
    return supervise(command, timeout, env=env, merge_output=True, echo=echo,
                     tail_lines=TORCHRUN_TAIL_LINES)


def ending(outcome: ChildOutcome, timeout: float) -> tuple[str, str]:
    """(status, error) of a worker that did not finish: ``timeout`` or ``crashed``."""
    if outcome.timed_out:
        return "timeout", f"the case did not finish within --case-timeout {timeout:g} s"
    error = f"the worker process {outcome.death()}"
    return "crashed", f"{error}: {outcome.last_line()}" if outcome.last_line() else error


def in_worker(spec: WorkerSpec, failed: CaseResult, timeout: float,
              progress: Progress | None, echo: bool = False) -> CaseResult:
    """The worker's result; when it dies or overruns ``timeout``, ``failed`` (a skeleton of the
    case, or the partial result the worker left) with status ``crashed`` or ``timeout``."""
    outcome, data = worker_call(spec, timeout, progress, echo)
    if data is not None:
        result = CaseResult.from_dict(data)
        if outcome.returncode == 0:
            return result
        failed = result  # a partial result: what finished before the worker ended
    failed.status, failed.error = ending(outcome, timeout)
    if not outcome.timed_out:
        failed.stderr_tail = list(outcome.output_tail)
    return failed


class CaseWork(ABC, Generic[Item]):
    """A subcommand's per-case work, plugged into the driver (see ``engine.driver.drive``)."""

    #: The subcommand's function that runs one case in a worker process, as
    #: ``module:function`` (called with the :class:`WorkerSpec` and a :class:`Report`); empty
    #: for work that runs only inline.
    worker: ClassVar[str] = ""
    #: "process": each case in a worker process; "none": inline, in this process; "torchrun":
    #: the case's ranks under torchrun, started by the work's :meth:`ranks` (scale).
    isolation: str = "none"
    timeout: float = DEFAULT_CASE_TIMEOUT_S
    #: Write the worker's stderr to ours as it comes (--debug).
    echo: bool = False

    @abstractmethod
    def label(self, item: Item) -> str:
        """The case in words, for the progress display."""

    @abstractmethod
    def skeleton(self, item: Item) -> CaseResult:
        """The result that names the case before anything ran."""

    @abstractmethod
    def inline(self, item: Item, progress: Progress | None) -> CaseResult:
        """Run the case in this process; every exception the work can raise becomes a status."""

    def spec(self, item: Item) -> WorkerSpec:
        """The case for a worker process (the worker function rebuilds it)."""
        raise NotImplementedError(f"{type(self).__name__} runs only inline")

    def ranks(self, item: Item, progress: Progress | None) -> CaseResult:
        """Run the case's ranks under torchrun (:func:`torchrun_command` and :func:`in_torchrun`
        with the work's spec) and make one result of their reports."""
        raise NotImplementedError(f"{type(self).__name__} does not run under torchrun")

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

    def run(self, item: Item, progress: Progress | None) -> CaseResult:
        """One case through the chosen launcher."""
        if self.isolation == "process":
            return in_worker(self.spec(item), self.skeleton(item), self.timeout, progress,
                             self.echo)
        if self.isolation == "torchrun":
            return self.ranks(item, progress)
        return self.inline(item, progress)
