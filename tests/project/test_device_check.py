"""scripts/device-check.sh (issues 33 and 34): the check a session runs first whenever a GPU is
lent. Here it runs at tiny size on the CPU, as CI runs it: every step within the check's budget,
every step exiting 0, and what it saw written where the device tool brings it back."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_device_check_runs_every_step_at_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "DEVICE": "cpu", "SIZE": "tiny", "BUDGET": "500",
           "PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH"))
                                         if p)}
    done = subprocess.run(["bash", str(REPO / "scripts" / "device-check.sh")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    log = (out / "device-check.log").read_text()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = re.findall(r"\] ([\w-]+): exit (\d+)", log)
    names = [name for name, _ in steps]
    assert {"roofline", "gpt-fast", "yardstick-compiled", "yardstick-eager", "check-quantized",
            "selftest", "repeat", "stream"} <= set(names), names
    failed = [(name, rc) for name, rc in steps if rc != "0" and name not in ("install", "nvidia-smi")]
    assert not failed, f"{failed}\n{log[-4000:]}"
    assert "skipped (the check's" not in log, log[-2000:]
    # The recipe ran and said so; the yardstick's plain loop and accelbench both decoded.
    assert "decode compiled, fullgraph (eager:reduce-overhead)" in log
    assert "accelbench / plain geometric mean" in log
    assert (out / "host-load.txt").stat().st_size > 0
    with tarfile.open(out / "results.tar.gz") as archive:
        stored = archive.getnames()
    assert any(name.endswith("gpt-fast.json") for name in stored), stored
    assert any(name.endswith("yardstick-compiled.json") for name in stored), stored
