"""The command line, run as a real process: end to end, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from idx import write_tiny_mnist

import accelbench


def assert_one_line_error(proc, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("accelbench: error:")
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_run_mnist_on_cpu_end_to_end(cli, tmp_path: Path, accelbench_home: Path) -> None:
    out = tmp_path / "result.json"
    proc = cli("run", "mnist", "--device", "cpu", "--steps", "4", "--warmup", "1",
               "--batch-size", "16", "--threads", "1", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["schema_version"] == 2 and data["accelbench_version"] == accelbench.__version__
    assert data["environment"]["torch"]["version"]
    assert data["environment"]["python"]["version"]
    assert data["environment"]["availability"]["cuda"]["available"] is False
    modes = [case["mode"] for case in data["cases"]]
    assert modes == ["train", "eval"]
    train = data["cases"][0]
    assert train["status"] == "ok" and train["device"] == "cpu" and train["batch_size"] == 16
    assert len(train["step_times"]) == 4 and all(t > 0 for t in train["step_times"])
    assert train["warmup_steps"] == 1 and train["threads"] == 1
    assert train["derived"]["throughput_samples_per_s"] == pytest.approx(
        16 / train["derived"]["stats"]["median"])
    assert train["derived"]["epoch_time_kind"] == "projected"
    assert train["peak_memory_bytes"] > 0 and train["memory_source"] == "process peak RSS"
    # Every run is also kept in the per-user results folder, and its path is printed.
    saved = list((accelbench_home / "results").glob("*.json"))
    assert len(saved) == 1 and str(saved[0]) in proc.stdout.replace("\n", "")
    assert "mnist" in proc.stdout and "samples/s" in proc.stdout
    # ... and in the history database, with the raw samples.
    from accelbench.store.history import HistoryDB

    with HistoryDB(accelbench_home / "history.sqlite") as history:
        stored = history.get(data["run_id"])
    assert stored.cases[0].step_times == train["step_times"]


def test_version_and_module_entry_point(cli) -> None:
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"accelbench {accelbench.__version__}"


def test_real_data_through_the_cli(cli, tmp_path: Path) -> None:
    write_tiny_mnist(tmp_path / "data")
    out = tmp_path / "r.json"
    proc = cli("run", "mnist", "--device", "cpu", "--data", "real", "--data-dir",
               str(tmp_path / "data"), "--epochs", "1", "--batch-size", "10", "--warmup", "0",
               "--mode", "eval", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    case = json.loads(out.read_text())["cases"][0]
    assert case["data"] == "real" and case["dataset_size"] == 20
    assert case["derived"]["epoch_time_kind"] == "measured"


@pytest.mark.parametrize("args,needles", [
    (["run", "nosuch"], ["unknown workload 'nosuch'", "known: ", "mnist"]),
    (["run", "mnist", "--device", "tpu"], ["unknown device 'tpu'"]),
    (["run", "mnist", "--device", "cuda"], ["'cuda' is not available", "fix:"]),
    (["run", "mnist", "--device", "cuda:3"], ["not available"]),
    (["run", "mnist", "--steps", "0"], ["--steps", "positive"]),
    (["run", "mnist", "--steps", "abc"], ["--steps", "whole number"]),
    (["run", "mnist", "--batch-size", "-4"], ["--batch-size"]),
    (["run", "mnist", "--time-budget", "0"], ["--time-budget"]),
    (["run", "mnist", "--time-budget", "nan"], ["--time-budget"]),
    (["run", "mnist", "--threads", "0"], ["--threads"]),
    (["run", "mnist", "--epochs", "1e99"], ["--epochs"]),
    (["run", "mnist", "--mode", "infer"], ["--mode", "allowed"]),
    (["run", "mnist", "--steps", "3", "--epochs", "1"], ["not allowed with"]),
    (["run", "mnist", "--data", "real"], ["--data real needs --data-dir"]),
    (["run", "--suite", "nope"], ["unknown suite 'nope'"]),
    (["nosuchcommand"], ["invalid choice"]),
])
def test_bad_usage_is_one_line_exit_2(inline_cli, args: list[str], needles: list[str]) -> None:
    assert_one_line_error(inline_cli(*args), *needles)


@pytest.mark.parametrize("args,needles", [
    (["run", "nosuch"], ["unknown workload 'nosuch'"]),
    (["run", "mnist", "--device", "cuda"], ["'cuda' is not available", "fix:"]),
    (["nosuchcommand"], ["invalid choice"]),
])
def test_bad_usage_in_a_real_process_is_one_line_exit_2(cli, args: list[str], needles: list[str]) -> None:
    """The same path as above through the installed entry point: no traceback reaches a user."""
    assert_one_line_error(cli(*args), *needles)


_NO_TORCH_PROBE = """
import sys
from accelbench.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print(f"exit={code} torch={'torch' in sys.modules}")
"""


@pytest.mark.parametrize("args", [
    ["run", "--batch-size", "x"],
    ["run", "mnist", "--steps", "0"],
    ["check", "--reference", "gpu"],
    ["check", "--steps", "0"],
    ["sweep", "mnist", "--batch-size", "x"],
])
def test_bad_usage_is_reported_before_torch_is_imported(args: list[str], accelbench_home: Path) -> None:
    # Importing torch takes 1-5 s: a typo must not wait for it. Real process, fresh interpreter.
    env = {**os.environ, "ACCELBENCH_HOME": str(accelbench_home)}
    done = subprocess.run([sys.executable, "-c", _NO_TORCH_PROBE, *args], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.stdout.strip() == "exit=2 torch=False", (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "error:" in done.stderr


def test_real_data_without_files_names_them(cli, tmp_path: Path) -> None:
    assert_one_line_error(cli("run", "mnist", "--data", "real", "--data-dir", str(tmp_path)),
                          "train-images-idx3-ubyte")


def test_unwritable_output_fails_before_running(cli, tmp_path: Path, accelbench_home: Path) -> None:
    assert_one_line_error(cli("run", "mnist", "--steps", "1", "-o", str(tmp_path / "no" / "r.json")),
                          "does not exist")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if os.access(locked, os.W_OK):  # root ignores permissions
        pytest.skip("running as root: permission bits do not stop writes")
    assert_one_line_error(cli("run", "mnist", "--steps", "1", "-o", str(locked / "r.json")),
                          "permission denied")
    assert not (accelbench_home / "results").exists()


def test_output_that_is_a_folder(cli, tmp_path: Path) -> None:
    assert_one_line_error(cli("run", "mnist", "--steps", "1", "-o", str(tmp_path)), "is a folder")


def test_debug_shows_the_traceback(cli) -> None:
    proc = cli("run", "nosuch", "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_doctor_reports_every_kind_with_reasons(cli) -> None:
    proc = cli("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    kinds = {entry["kind"]: entry for entry in report["devices"]}
    assert {"cpu", "cuda", "mps", "xpu"} <= set(kinds)
    assert kinds["cpu"]["available"] and kinds["cpu"]["instances"][0]["logical_cores"] >= 1
    for entry in kinds.values():
        if not entry["available"]:
            assert entry["reason"] and entry["fix"]
    assert report["cpu"]["torch_threads"] >= 1 and report["torch"]["version"]
    text = cli("doctor")
    assert text.returncode == 0 and "Devices" in text.stdout and "Best device" in text.stdout
