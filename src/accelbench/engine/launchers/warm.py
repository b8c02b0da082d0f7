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
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.engine.launchers.base import DONE_PREFIX, Progress, progress_line
from accelbench.engine.launchers.process import WORKER_MODULE, case_result
from accelbench.engine.supervise import ServedChild
from accelbench.results import CaseResult

if TYPE_CHECKING:
    from accelbench.engine.spec import CaseSpec
    from accelbench.engine.work import CaseWork

#: ``CaseResult.isolation`` of a case run in a warm worker begins with this.
WARM_WORKER = "warm worker"


def warm_isolation(pid: int) -> str:
    return f"{WARM_WORKER}, pid {pid}"


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
    #: Worker processes started so far, the replacements of dead ones included.
    started: int = 0
    workers: dict[str, ServedChild] = field(default_factory=dict)
    name = "warm"

    def prestart(self, spec: CaseSpec) -> None:
        """Start the worker ``spec``'s case will run in now, so its start-up overlaps whatever
        the caller does before the first case."""
        self._worker(device_key(spec))

    def _worker(self, key: str) -> ServedChild:
        worker = self.workers.get(key)
        if worker is None:
            worker = ServedChild([sys.executable, "-m", WORKER_MODULE, "--serve", self.work],
                                 DONE_PREFIX, echo=self.echo)
            self.workers[key] = worker
            self.started += 1
        return worker

    def launch(self, work: CaseWork[Any], item: Any, progress: Progress | None) -> CaseResult:
        spec = work.spec(item)
        key = device_key(spec)
        worker = self._worker(key)

        def on_line(line: str) -> bool:
            progress_line(line, progress)
            return True  # stdout carries only messages for us; anything else there is dropped

        with tempfile.TemporaryDirectory(prefix="accelbench-case-") as folder:
            spec_path, result_path = Path(folder) / "spec.json", Path(folder) / "result.json"
            spec_path.write_text(spec.to_json())
            outcome, finished = worker.call(json.dumps([str(spec_path), str(result_path)]),
                                            self.timeout, on_line)
            data = json.loads(result_path.read_text()) if result_path.exists() else None
        if not finished:  # it died or was killed: the next case on the device starts a fresh one
            self.workers.pop(key, None)
            worker.close(grace=0)
        result = case_result(outcome, finished, data, work.skeleton(item), self.timeout)
        result.isolation = warm_isolation(worker.pid)
        return result

    def close(self) -> None:
        """End every worker (each exits at the end of its input)."""
        workers, self.workers = list(self.workers.values()), {}
        for worker in workers:
            worker.close()
