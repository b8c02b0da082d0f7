"""Faults inside a case become its status and the suite goes on; signals save what finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

FAULTY = Path(__file__).resolve().parents[1] / "data" / "faulty_workloads.py"
TINY = ["--workload-file", str(FAULTY), "--device", "cpu", "--size", "tiny", "--warmup", "1",
        "--mode", "train"]


def cases_by_workload(path: Path) -> dict[str, dict]:
    return {case["workload"]: case for case in json.loads(path.read_text())["cases"]}


def test_segfault_in_a_case_is_recorded_and_the_suite_goes_on(cli, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = cli("run", "fault-segv", "mnist", *TINY, "--steps", "2", "-o", str(out))
    assert proc.returncode == 1, proc.stderr
    cases = cases_by_workload(out)
    assert cases["fault-segv"]["status"] == "crashed"
    assert "SIGSEGV" in cases["fault-segv"]["error"]
    assert cases["mnist"]["status"] == "ok"


def test_hang_past_the_case_timeout(cli, tmp_path: Path) -> None:
    # That the suite goes on after a failed case is shown by the segfault test; here only the stop.
    out = tmp_path / "r.json"
    start = time.monotonic()
    proc = cli("run", "fault-hang", *TINY, "--steps", "2", "--case-timeout", "20", "-o", str(out))
    assert 20 <= time.monotonic() - start < 90
    assert proc.returncode == 1
    case = cases_by_workload(out)["fault-hang"]
    assert case["status"] == "timeout" and "--case-timeout 20" in case["error"]


def test_out_of_memory_is_a_status_and_auto_batch_halves(cli, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = cli("run", "fault-oom", *TINY, "--steps", "2", "-o", str(out))
    assert proc.returncode == 1
    case = cases_by_workload(out)["fault-oom"]
    assert case["status"] == "oom" and "simulated at batch 16" in case["error"]
    assert case["batch_size"] == 16

    proc = cli("run", "fault-oom", *TINY, "--steps", "2", "--auto-batch", "--isolation", "none",
               "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    case = cases_by_workload(out)["fault-oom"]
    assert case["status"] == "ok" and case["batch_size"] == 4
    assert case["oom_batch_sizes"] == [16, 8]


def start_command(args: list[str], home: Path) -> subprocess.Popen[str]:
    """``python -m accelbench ARGS`` in the background, with Python's own SIGINT handler (a test
    runner started in the background has SIGINT ignored, and children would inherit that)."""
    return subprocess.Popen([sys.executable, "-m", "accelbench", *args],
                            env={**os.environ, "ACCELBENCH_HOME": str(home)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def signal_after_the_first_case(process: subprocess.Popen[str], home: Path,
                                signum: int) -> tuple[Path, str]:
    """Wait until the results folder holds the record with its first case finished (the second
    is then running), send ``signum``, wait for the command to end; the record's path and the
    command's stderr."""
    results = home / "results"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        files = list(results.glob("*.json")) if results.exists() else []
        if files and len(json.loads(files[0].read_text())["cases"]) == 1:
            break
        time.sleep(0.2)
    else:
        process.kill()
        pytest.fail("the first case never finished")
    time.sleep(2)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    return files[0], stderr


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_a_suite_saves_finished_cases(tmp_path: Path, accelbench_home: Path,
                                                   signum: int, code: int) -> None:
    out = tmp_path / "r.json"
    # fault-slow sleeps 2 s a step: it is still running long after mnist is saved.
    process = start_command(["run", "mnist", "fault-slow", *TINY, "--steps", "20", "-o", str(out)],
                            accelbench_home)
    saved, stderr = signal_after_the_first_case(process, accelbench_home, signum)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    for path in (out, saved):
        cases = cases_by_workload(path)
        assert cases["mnist"]["status"] == "ok"
        assert cases["fault-slow"]["status"] == "interrupted"
        assert signal.Signals(signum).name in cases["fault-slow"]["error"]
