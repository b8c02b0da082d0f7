"""The warm process launcher: consecutive cases on a device share one worker process
(``python -m accelbench.engine.launchers.worker --serve WORK``), so starting Python and importing
torch, seconds on a small machine, is paid once per device rather than once per case. It is
``run``'s at ``--size tiny`` where ``--isolation`` is left out (options/values.py); an explicit
``--isolation process`` keeps a fresh worker per case.

Each case still begins as it would in a fresh process: the worker puts back what the case before
changed (numeric switches, default dtype, environment, seeds, memory: fresh.py), and a compiled
case compiles into caches of its own (cold_start.py). What cannot be put back (the device already
initialised, kernels loaded, modules imported) is said in the result: ``start.cases_before``
counts the cases before it in its worker, so its first-use figures are marked warm, and
``isolation`` names the worker (``warm worker, pid N``).

A worker that dies or overruns the case timeout costs only its case (status crashed or timeout,
with the partial result it left, as with a worker per case), and the next case on that device
starts a fresh worker.

The command can start the first worker before it imports torch itself (:func:`start_ahead`), so
the two imports overlap; the launcher takes that worker for its first case.
"""

from __future__ import annotations

import atexit
import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelbench.engine.launchers.base import DONE_PREFIX, Progress, Work
from accelbench.engine.launchers.process import WORKER_MODULE, case_result, line_reader, spec_files
from accelbench.engine.supervise import ServedChild

if TYPE_CHECKING:
    from accelbench.engine.spec import CaseSpec
    from accelbench.results import CaseResult

#: ``CaseResult.isolation`` of a case run in a warm worker begins with this.
WARM_WORKER = "warm worker"
#: A worker started ahead (start_ahead), until a launcher takes it.
_ahead: list[ServedChild] = []


def warm_isolation(pid: int) -> str:
    return f"{WARM_WORKER}, pid {pid}"


def _serve_command(work: str = "") -> list[str]:
    return [sys.executable, "-m", WORKER_MODULE, "--serve", *([work] if work else [])]


def start_ahead() -> None:
    """Start a warm worker now, before this process imports torch: it imports torch and the
    engine meanwhile, and the first warm launcher takes it. One not taken is ended at exit (it
    would end anyway at the end of its input, when this process exits)."""
    if not _ahead:
        _ahead.append(ServedChild(_serve_command(), DONE_PREFIX))
        atexit.register(_end_ahead)


def _end_ahead() -> None:
    while _ahead:
        _ahead.pop().close(grace=0)


def _taken_ahead() -> ServedChild | None:
    worker = _ahead.pop() if _ahead else None
    if worker is not None and not worker.alive:
        worker.close(grace=0)
        return None
    return worker


def device_key(spec: CaseSpec) -> str:
    """Which warm worker a case goes to: one per device (a case without one shares the "")."""
    return spec.case.device.name if spec.case is not None else ""


@dataclass
class WarmLauncher:
    #: Seconds a case may take before its worker (and everything under it) is killed.
    timeout: float
    #: The work's worker function (``module:function``), imported as the worker starts.
    work: str
    #: Write the workers' stderr to ours as it comes (--debug).
    echo: bool = False
    workers: dict[str, ServedChild] = field(default_factory=dict)
    name = "warm"

    def prestart(self, spec: CaseSpec) -> None:
        """Start the worker ``spec``'s case will run in now, so its start-up overlaps whatever
        the caller does before the first case."""
        self._worker(device_key(spec))

    def _worker(self, key: str) -> ServedChild:
        worker = self.workers.get(key)
        if worker is None:
            worker = (None if self.echo else _taken_ahead()) or \
                ServedChild(_serve_command(self.work), DONE_PREFIX, echo=self.echo)
            self.workers[key] = worker
        return worker

    def launch(self, work: Work, item: Any, progress: Progress | None) -> CaseResult:
        spec = work.spec(item)
        key = device_key(spec)
        worker = self._worker(key)

        with spec_files(spec) as (spec_path, result_path, left):
            outcome, finished = worker.call(json.dumps([str(spec_path), str(result_path)]),
                                            self.timeout, line_reader(progress))
            data = left()
        if not finished:  # it died or was killed: the next case on the device starts a fresh one
            self.workers.pop(key, None)
            worker.close(grace=0)
        result = case_result(outcome, finished, data, work.skeleton(item), self.timeout)
        result.isolation = warm_isolation(worker.pid)
        return result

    def close(self) -> None:
        """End every worker. They are idle (a case that was running was ended with it) and hold
        nothing to save: killed at once, they spare the run their interpreter's teardown."""
        workers, self.workers = list(self.workers.values()), {}
        for worker in workers:
            worker.close(grace=0)
