"""The process launcher: the case in a worker process (``--isolation process``), under the one
supervisor: a crash, a hang or an out-of-memory kill costs only this case, and is its status.

The worker (``python -m accelbench.engine.launchers.worker SPEC.json RESULT.json``) runs the
spec's work function; progress comes back as lines on its stdout, the result (or, when it dies,
the partial result it left) in RESULT.json.

With ``resume``, a worker that dies or overruns costs only the piece of the case it was in: the
work says what the worker finished and what remains (:class:`ResumableWork`), and a fresh worker
goes on with the rest (``probe``: a feature that kills its worker is that feature's cell only).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from accelbench.engine.launchers.base import Progress, Work, progress_line
from accelbench.engine.supervise import ChildOutcome, supervise

if TYPE_CHECKING:
    from accelbench.engine.spec import CaseSpec
    from accelbench.results import CaseResult

#: The entry every worker process and torchrun rank runs.
WORKER_MODULE = "accelbench.engine.launchers.worker"


def worker_call(spec: CaseSpec, timeout: float, progress: Progress | None,
                echo: bool = False) -> tuple[ChildOutcome, dict[str, Any] | None]:
    """Run the spec's work in a worker process: how it ended, and the result it left (complete
    when it exited 0, else the partial result it reported, or None).

    KeyboardInterrupt and other BaseExceptions stop the worker and propagate to the caller.
    """
    with spec_files(spec) as (spec_path, result_path, left):
        outcome = supervise([sys.executable, "-m", WORKER_MODULE, str(spec_path),
                             str(result_path)], timeout, on_line=line_reader(progress), echo=echo)
        data = left()
    return outcome, data


def line_reader(progress: Progress | None) -> Callable[[str], bool]:
    """What a worker's stdout line is: a progress message for us; anything else is dropped."""
    def on_line(line: str) -> bool:
        progress_line(line, progress)
        return True
    return on_line


@contextmanager
def spec_files(spec: CaseSpec) -> Iterator[tuple[Path, Path, Callable[[], dict[str, Any] | None]]]:
    """The spec written for a worker, where it leaves its result, and a reader of that result
    (None where it left none); the folder goes when the case is done."""
    with tempfile.TemporaryDirectory(prefix="accelbench-case-") as folder:
        spec_path, result_path = Path(folder) / "spec.json", Path(folder) / "result.json"
        spec_path.write_text(spec.to_json())
        yield spec_path, result_path, lambda: (json.loads(result_path.read_text())
                                               if result_path.exists() else None)


def ending(outcome: ChildOutcome, timeout: float) -> tuple[str, str]:
    """(status, error) of a worker that did not finish: ``timeout`` or ``crashed``."""
    if outcome.timed_out:
        return "timeout", f"the case did not finish within --case-timeout {timeout:g} s"
    error = f"the worker process {outcome.death()}"
    return "crashed", f"{error}: {outcome.last_line()}" if outcome.last_line() else error


def in_worker(spec: CaseSpec, failed: CaseResult, timeout: float,
              progress: Progress | None, echo: bool = False) -> CaseResult:
    """The worker's result; when it dies or overruns ``timeout``, ``failed`` (a skeleton of the
    case, or the partial result the worker left) with status ``crashed`` or ``timeout``."""
    outcome, data = worker_call(spec, timeout, progress, echo)
    return case_result(outcome, outcome.returncode == 0, data, failed, timeout)


def case_result(outcome: ChildOutcome, finished: bool, data: dict[str, Any] | None,
                failed: CaseResult, timeout: float) -> CaseResult:
    """The result a worker left (``data``) when it ``finished`` the case; else ``failed`` (a
    skeleton of the case), or the partial result it left, with how the worker ended."""
    from accelbench.results import CaseResult  # numpy: not before a worker is started

    if data is not None:
        result = CaseResult.from_dict(data)
        if finished:
            return result
        failed = result  # a partial result: what finished before the worker ended
    failed.status, failed.error = ending(outcome, timeout)
    if not outcome.timed_out:
        failed.stderr_tail = list(outcome.output_tail)
    return failed


@runtime_checkable
class ResumableWork(Work, Protocol):
    """A work whose case goes on in a fresh worker after the piece a worker died in."""

    def first_spec(self, item: Any) -> CaseSpec | None:
        """The spec of the whole item for its first worker; None where there is nothing to run."""

    def resume(self, spec: CaseSpec, left: dict[str, Any] | None,
               ended: tuple[str, str] | None) -> tuple[Any, CaseSpec | None]:
        """After one worker ran ``spec``: its part of the result, from what it ``left`` (None:
        nothing); where it ended early (``ended``: status and error), the piece it was in
        marked so; and the spec of what remains (None: nothing does)."""

    def joined(self, item: Any, parts: list[Any]) -> Any:
        """The item's one result from its workers' parts, in order."""


def resumed(work: ResumableWork, item: Any, timeout: float, progress: Progress | None,
            echo: bool) -> Any:
    """``item`` through as many workers as it takes: each that dies or overruns ``timeout``
    costs the piece it was in, and a fresh one goes on with what remains."""
    parts: list[Any] = []
    spec = work.first_spec(item)
    while spec is not None:
        outcome, data = worker_call(spec, timeout, progress, echo)
        part, spec = work.resume(spec, data, None if outcome.returncode == 0
                                 else ending(outcome, timeout))
        parts.append(part)
        if outcome.returncode == 0:
            break
    return work.joined(item, parts)


@dataclass(frozen=True)
class ProcessLauncher:
    #: Seconds the case may take before its worker (and everything under it) is killed.
    timeout: float
    #: Write the worker's stderr to ours as it comes (--debug).
    echo: bool = False
    #: A worker that dies costs only the piece it was in; a fresh one goes on with the rest
    #: (the work is a :class:`ResumableWork`).
    resume: bool = False
    name = "process"

    def launch(self, work: Work, item: Any, progress: Progress | None) -> Any:
        if self.resume:
            if not isinstance(work, ResumableWork):
                raise TypeError(f"{type(work).__name__} cannot resume in a fresh worker")
            return resumed(work, item, self.timeout, progress, self.echo)
        return in_worker(work.spec(item), work.skeleton(item), self.timeout, progress, self.echo)
