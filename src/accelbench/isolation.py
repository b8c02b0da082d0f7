"""Run one case in its own worker process, so that a segfault, an abort, a hang or an
out-of-memory kill becomes that case's status and the suite goes on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from pathlib import Path
from typing import IO, TYPE_CHECKING

from accelbench.measure.loop import Progress
from accelbench.results import CaseResult
from accelbench.worker import PROGRESS_PREFIX

if TYPE_CHECKING:
    from accelbench.options import RunOptions
    from accelbench.runner import Case


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _kill(process: subprocess.Popen[str]) -> None:
    """Stop the worker and anything it started (it leads its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()


def _pump_progress(stream: IO[str], progress: Progress | None) -> None:
    for line in stream:
        if line.startswith(PROGRESS_PREFIX) and progress is not None:
            phase, done, total = json.loads(line[len(PROGRESS_PREFIX):])
            progress(phase, done, total)


def _pump_tail(stream: IO[str], tail: deque[str]) -> None:
    for line in stream:
        tail.append(line.rstrip())


def run_case_isolated(case: Case, options: RunOptions, progress: Progress | None,
                      failed: CaseResult) -> CaseResult:
    """The worker's result, or ``failed`` (a skeleton of this case) with the status that ended it.

    KeyboardInterrupt and other BaseExceptions stop the worker and propagate to the caller.
    """
    spec = {
        "options": options.to_dict(),
        "case": {"workload": case.workload, "mode": case.mode, "device": case.device.name,
                 "batch_size": case.batch_size, "precision": case.precision,
                 "compile_backend": case.compile_backend, "channels_last": case.channels_last},
    }
    with tempfile.TemporaryDirectory(prefix="accelbench-case-") as folder:
        spec_path, result_path = Path(folder) / "spec.json", Path(folder) / "result.json"
        spec_path.write_text(json.dumps(spec))
        process = subprocess.Popen(
            [sys.executable, "-m", "accelbench.worker", str(spec_path), str(result_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        tail: deque[str] = deque(maxlen=30)
        readers = [threading.Thread(target=_pump_progress, args=(process.stdout, progress), daemon=True),
                   threading.Thread(target=_pump_tail, args=(process.stderr, tail), daemon=True)]
        for reader in readers:
            reader.start()
        try:
            code = process.wait(timeout=options.case_timeout)
        except subprocess.TimeoutExpired:
            _kill(process)
            failed.status = "timeout"
            failed.error = f"the case did not finish within --case-timeout {options.case_timeout:g} s"
            return failed
        except BaseException:
            _kill(process)
            raise
        for reader in readers:
            reader.join(timeout=5)
        if code == 0 and result_path.exists():
            return CaseResult.from_dict(json.loads(result_path.read_text()))
        last = next((line for line in reversed(tail) if line.strip()), "")
        failed.status = "crashed"
        if code < 0:
            name = _signal_name(-code)
            hint = " (the system's out-of-memory killer is the usual sender)" if name == "SIGKILL" else ""
            failed.error = f"the worker process died from {name}{hint}"
        else:
            failed.error = f"the worker process exited with code {code}"
        if last:
            failed.error += f": {last}"
        failed.stderr_tail = list(tail)
        return failed
