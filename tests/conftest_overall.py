"""A real MLPerf Client run for the tests of the surfaces its stored overall figures reach (the
report, ``share --dry-run``, ``compare --against``): the run itself (a real subprocess, tiny gpt2 on
the CPU), a copy whose stored figures are planted ones no category could give (a surface that
recomputed them from the cases would show others), and a copy written before the figures were
stored (no ``protocol_overall`` key: read through ``protocol_summary.stored_overall``).

Imported explicitly by those tests (like conftest_report.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Planted stored figures (0.0777 s, 12,345.6 tokens/s): "77.7 ms" and "12,346 tokens/s" shown.
PLANTED = {"mlperf_ttft_geomean_s": 0.0777, "mlperf_token_rate_geomean": 12345.6}
RUN_ARGS = ("run", "gpt2", "--mode", "generate", "--protocol", "mlperf-client", "--size", "tiny",
            "--device", "cpu", "--steps", "2", "--warmup", "0")


def real_mlperf_run(folder: Path) -> Path:
    """``run.json`` of a real ``accelbench run --protocol mlperf-client`` (its own home in ``folder``)."""
    out = folder / "run.json"
    env = {**os.environ, "ACCELBENCH_HOME": str(folder / "home"), "COLUMNS": "160"}
    done = subprocess.run([sys.executable, "-m", "accelbench", *RUN_ARGS, "-o", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return out


def stored(path: Path) -> dict[str, Any]:
    """The one overall group the file stores (complete: every category)."""
    (group,) = json.loads(path.read_text())["protocol_overall"]
    assert not group["missing"] and group["mlperf_ttft_geomean_s"] and group["mlperf_token_rate_geomean"]
    return dict(group)


def planted_copy(path: Path, out: Path, figures: dict[str, float] | None = None) -> Path:
    """``path`` with its stored overall figures replaced by ``figures`` (PLANTED by default)."""
    data = json.loads(path.read_text())
    data["run_id"] += f"-{out.stem}"  # a run of its own (its own group id where shared)
    data["protocol_overall"][0].update(figures or PLANTED)
    out.write_text(json.dumps(data))
    return out


def unstored_copy(path: Path, out: Path) -> Path:
    """``path`` as written before the overall figures were stored: no ``protocol_overall`` key."""
    data = json.loads(path.read_text())
    data["run_id"] += f"-{out.stem}"
    del data["protocol_overall"]
    out.write_text(json.dumps(data))
    return out
