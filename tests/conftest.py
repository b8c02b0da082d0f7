"""Shared fixtures: an isolated accelbench home and a real-subprocess CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def peak_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One measurement of the CPU's matmul peak serves the whole session."""
    return tmp_path_factory.mktemp("peak") / "peak_flops.json"


@pytest.fixture(autouse=True)
def accelbench_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, peak_cache: Path) -> Path:
    """Every test writes results into its own folder, never the user's."""
    home = tmp_path / "accelbench-home"
    monkeypatch.setenv("ACCELBENCH_HOME", str(home))
    monkeypatch.setenv("ACCELBENCH_PEAK_CACHE", str(peak_cache))
    return home


@pytest.fixture
def inline_cli(accelbench_home: Path, monkeypatch: pytest.MonkeyPatch):
    """Run ``accelbench.cli.main(ARGS)`` in this process (no interpreter start-up, no torch import:
    for the many bad-usage cases; ``cli`` proves the same path in a real process). Returns a
    CompletedProcess with the exit code and what was written to stdout and stderr."""
    import contextlib
    import io

    from accelbench.cli import main

    monkeypatch.setenv("COLUMNS", "160")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 1
        return subprocess.CompletedProcess(["accelbench", *args], code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def cli(accelbench_home: Path):
    """Run ``python -m accelbench ARGS`` as a real process; returns CompletedProcess."""

    def run(*args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "ACCELBENCH_HOME": str(accelbench_home), "COLUMNS": "160",
                    **(env or {})}
        return subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                              text=True, timeout=timeout, env=full_env, cwd=cwd)

    return run
