"""The launcher axis: a subcommand's per-case work, run inline or in a worker process.

A subcommand plugs in a :class:`CaseWork`: how to run one case in this process, how to describe
it to a worker (a JSON spec), and the result that names the case before anything ran (what a
crash, a timeout or an interruption is recorded on). In a worker (``python -m accelbench.engine.worker
SPEC RESULT``) the spec's ``work`` picks the function in :data:`WORKER_FUNCTIONS`.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from accelbench.engine.supervise import ChildOutcome, supervise
from accelbench.results import CaseResult, DeviceProbe, RunRecord

#: A case's progress: (phase, done, total or None).
Progress = Callable[[str, float, "float | None"], None]
Item = TypeVar("Item")

PROGRESS_PREFIX = "@@accelbench-progress "
DEFAULT_CASE_TIMEOUT_S = 1800.0
ISOLATIONS = ("process", "none")

#: The spec's ``work`` -> ``module:function(spec, report) -> CaseResult`` run in the worker.
#: Imported only there, and only the one named, so a worker loads no other subcommand's code.
WORKER_FUNCTIONS: dict[str, str] = {
    "run": "accelbench.engine.runner:run_from_spec",
    "check": "accelbench.parity.check:check_from_spec",
    "probe": "accelbench.probes.work:probe_from_spec",
}


def worker_function(work: str) -> Callable[[dict[str, Any], Report], CaseResult]:
    if work not in WORKER_FUNCTIONS:
        raise ValueError(f"unknown work {work!r}; known: {', '.join(WORKER_FUNCTIONS)}")
    module, name = WORKER_FUNCTIONS[work].split(":")
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


def worker_call(work: str, spec: dict[str, Any], timeout: float, progress: Progress | None,
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
        spec_path.write_text(json.dumps({**spec, "work": work}))
        outcome = supervise([sys.executable, "-m", "accelbench.engine.worker", str(spec_path),
                             str(result_path)], timeout, on_line=on_line, echo=echo)
        data = json.loads(result_path.read_text()) if result_path.exists() else None
    return outcome, data


def ending(outcome: ChildOutcome, timeout: float) -> tuple[str, str]:
    """(status, error) of a worker that did not finish: ``timeout`` or ``crashed``."""
    if outcome.timed_out:
        return "timeout", f"the case did not finish within --case-timeout {timeout:g} s"
    error = f"the worker process {outcome.death()}"
    return "crashed", f"{error}: {outcome.last_line()}" if outcome.last_line() else error


def in_worker(work: str, spec: dict[str, Any], failed: CaseResult, timeout: float,
              progress: Progress | None, echo: bool = False) -> CaseResult:
    """The worker's result; when it dies or overruns ``timeout``, ``failed`` (a skeleton of the
    case, or the partial result the worker left) with status ``crashed`` or ``timeout``."""
    outcome, data = worker_call(work, spec, timeout, progress, echo)
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

    #: The key of :data:`WORKER_FUNCTIONS` that runs this work in a worker process.
    kind: ClassVar[str]
    #: "process": each case in a worker process; "none": inline, in this process.
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

    def spec(self, item: Item) -> dict[str, Any]:
        """The case for a worker process, as JSON (the worker function rebuilds it)."""
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

    def run(self, item: Item, progress: Progress | None) -> CaseResult:
        """One case through the chosen launcher."""
        if self.isolation == "process":
            return in_worker(self.kind, self.spec(item), self.skeleton(item), self.timeout,
                             progress, self.echo)
        return self.inline(item, progress)
