"""The process launcher: the case in a worker process (``--isolation process``), under the one
supervisor: a crash, a hang or an out-of-memory kill costs only this case, and is its status.

The worker (``python -m accelbench.engine.launchers.worker SPEC.json RESULT.json``) runs the
spec's work function; progress comes back as lines on its stdout, the result (or, when it dies,
the partial result it left) in RESULT.json.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.engine.launchers.base import Progress, progress_line
from accelbench.engine.supervise import ChildOutcome, supervise

if TYPE_CHECKING:
    from accelbench.engine.spec import CaseSpec
    from accelbench.engine.work import CaseWork
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


@dataclass(frozen=True)
class ProcessLauncher:
    #: Seconds the case may take before its worker (and everything under it) is killed.
    timeout: float
    #: Write the worker's stderr to ours as it comes (--debug).
    echo: bool = False
    name = "process"

    def launch(self, work: CaseWork[Any], item: Any, progress: Progress | None) -> CaseResult:
        return in_worker(work.spec(item), work.skeleton(item), self.timeout, progress, self.echo)
