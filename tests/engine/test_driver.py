"""The one driver: check and probe cases run in worker processes (a crash costs only that case),
Ctrl-C keeps the finished cases, and every child process runs under the one supervisor."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest
from rich.console import Console
from test_faults import FAULTY, cases_by_workload, signal_after_the_first_case, start_command

from accelbench.engine.driver import Interrupted, drive
from accelbench.engine.launchers.base import Progress
from accelbench.engine.launchers.torchrun import in_torchrun
from accelbench.engine.progress import progress_display
from accelbench.engine.supervise import supervise
from accelbench.engine.work import CaseWork
from accelbench.results import CaseResult, RunRecord

FEATURES = Path(__file__).resolve().parents[1] / "data" / "faulty_features.py"
CHECK = ["check", "--workload-file", str(FAULTY), "--device", "cpu", "--size", "tiny"]


def test_a_segfault_in_one_check_case_leaves_the_others_finished(cli, tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    proc = cli(*CHECK, "fault-segv", "mnist", "--steps", "2", "-o", str(out))
    assert proc.returncode == 1, proc.stderr
    cases = cases_by_workload(out)
    assert cases["fault-segv"]["status"] == "crashed"
    assert "SIGSEGV" in cases["fault-segv"]["error"]
    assert cases["mnist"]["status"] == "ok"
    assert cases["mnist"]["parity"]["verdict"] == "pass"
    # The table's verdict names the crash, not a bare "failed".
    row = next(line for line in proc.stdout.splitlines() if "fault-segv" in line)
    assert "crashed" in row and "failed" not in row, proc.stdout


def test_a_segfault_in_one_probe_costs_only_its_cell(cli, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    proc = cli("probe", "--device", "cpu", "--feature-file", str(FEATURES), "--feature", "float64",
               "--feature", "fault_segv", "--feature", "after_crash", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    record = json.loads(out.read_text())
    assert record["cases"] == []  # a probe run's findings are per-device probes, not fake cases
    (probe,) = record["probes"]
    cells = probe["cells"]
    assert list(cells) == ["float64", "fault_segv", "after_crash"]
    assert cells["fault_segv"]["status"] == "crashed" and "SIGSEGV" in cells["fault_segv"]["detail"]
    assert cells["float64"]["status"] == "works"
    assert cells["after_crash"]["status"] == "works"  # a fresh worker went on after the crash


def test_ctrl_c_during_check_keeps_the_finished_cases(tmp_path: Path, accelbench_home: Path) -> None:
    out = tmp_path / "check.json"
    # fault-slow sleeps 2 s a step: it is still running long after mnist is saved.
    process = start_command([*CHECK, "mnist", "fault-slow", "--steps", "5", "-o", str(out)],
                            accelbench_home)
    saved, stderr = signal_after_the_first_case(process, accelbench_home, signal.SIGINT)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    for path in (out, saved):  # -o is kept as current as the results folder
        cases = cases_by_workload(path)
        assert cases["mnist"]["status"] == "ok"
        assert cases["fault-slow"]["status"] == "interrupted"
        assert "SIGINT" in cases["fault-slow"]["error"]


# A child that, like torchrun, starts a process in a session of its own, then hangs.
_HANGS_WITH_A_GRANDCHILD = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                              start_new_session=True)
print(grandchild.pid, flush=True)
time.sleep(600)
"""


def test_the_torchrun_launch_kills_a_timed_out_group_and_says_so(tmp_path: Path) -> None:
    start = time.monotonic()
    outcome = in_torchrun([sys.executable, "-c", _HANGS_WITH_A_GRANDCHILD], dict(os.environ),
                          timeout=3, echo=False)
    assert time.monotonic() - start < 30
    assert outcome.timed_out and outcome.returncode is None
    assert outcome.death() == "was killed at the timeout"
    grandchild = int(outcome.output_tail[0])
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == "zombie"


def test_the_supervisor_names_the_signal_and_keeps_the_stderr_tail() -> None:
    progress: list[str] = []
    outcome = supervise([sys.executable, "-c", "import os, sys; print('@@step 1', flush=True); "
                         "sys.stderr.write('about to abort\\n'); sys.stderr.flush(); os.abort()"],
                        timeout=30, on_line=lambda line: progress.append(line.strip()) or True)
    assert outcome.returncode == -signal.SIGABRT
    assert outcome.death() == "died from SIGABRT"
    assert outcome.last_line() == "about to abort"
    assert progress == ["@@step 1"]


class _Counting(CaseWork[int]):
    """Inline work on numbers: a case is its number; 2 is where Ctrl-C arrives."""

    kind = "test"

    def label(self, item: int) -> str:
        return f"case {item}"

    def skeleton(self, item: int) -> CaseResult:
        return CaseResult(workload=f"w{item}", mode="train", device="cpu", batch_size=1)

    def inline(self, item: int, progress: Progress | None) -> CaseResult:
        if progress is not None:
            progress("measure", 1, 2)
        if item == 2:
            raise KeyboardInterrupt
        return self.skeleton(item)


def test_the_driver_saves_each_case_and_marks_the_interrupted_one() -> None:
    saved: list[list[str]] = []
    phases: list[tuple[int, str]] = []
    record = RunRecord("r", "2025-01-01", "0")
    with pytest.raises(Interrupted) as stopped:
        drive(_Counting(), [1, 2, 3], record, on_case=lambda r: saved.append(
            [f"{c.workload}:{c.status}" for c in r.cases]),
            progress=lambda index, phase, done, total: phases.append((index, phase)))
    assert (stopped.value.signal_name, stopped.value.exit_code) == ("SIGINT", 130)
    assert saved == [["w1:ok"]]  # saved the moment case 1 ended; case 3 never started
    assert [(c.workload, c.status) for c in stopped.value.record.cases] == [
        ("w1", "ok"), ("w2", "interrupted")]
    assert phases == [(0, "running"), (0, "measure"), (0, "ok"), (1, "running"), (1, "measure")]


def test_the_display_shows_each_case_with_its_phase() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    with progress_display(["case one", "case two"], console=console) as update:
        assert update is not None
        update(1, "crashed", 1.0, 1.0)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "case one" in text and "queued" in text and "crashed" in text
    with progress_display(["case one"], console=console, quiet=True) as update:
        assert update is None
