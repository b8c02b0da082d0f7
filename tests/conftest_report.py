"""Hand-built records for the history, compare, export and report tests (no benchmark is run).

Imported explicitly by those tests; the ``cli`` and ``accelbench_home`` fixtures come from
conftest.py.
"""

from __future__ import annotations

import subprocess
from typing import Any

import numpy as np

from accelbench.options.recorded import RecordedRun
from accelbench.results import CaseResult, RunRecord

HOSTILE_MACHINE = "<script>window.__pwned=1</script>"
HOSTILE_ERROR = "<img src=x onerror=window.__pwned=2>"


def steps(median: float, n: int = 30, spread: float = 0.02, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in median * (1 + spread * rng.standard_normal(n)).clip(0.5)]


def case(workload: str = "mnist", mode: str = "train", device: str = "cpu", median: float = 0.1,
         batch_size: int = 64, seed: int = 0, **fields: Any) -> CaseResult:
    fields.setdefault("step_times", steps(median, seed=seed))
    fields.setdefault("dataset_size", 60000)
    return CaseResult(workload=workload, mode=mode, device=device, batch_size=batch_size, **fields)


def record(run_id: str, cases: list[CaseResult], machine: str = "box", created_at: str =
           "2025-01-02T03:04:05+00:00", kind: str = "run") -> RunRecord:
    environment = {"machine": {"hostname": machine, "platform": "Linux-test"},
                   "python": {"version": "3.11"}, "torch": {"version": "2.6"},
                   "devices": {"cpu": {"name": "Test CPU", "physical_cores": 4,
                                       "memory_total_bytes": 16 * 2**30}}}
    return RunRecord(run_id=run_id, created_at=created_at, accelbench_version="0.1.0",
                     command=["accelbench", "run"], options=RecordedRun(), environment=environment,
                     cases=cases, kind=kind)


def cpu_and_cuda(run_id: str, machine: str = "box", cpu: float = 0.1, cuda: float = 0.05,
                 created_at: str = "2025-01-02T03:04:05+00:00") -> RunRecord:
    return record(run_id, [case(median=cpu, seed=1), case(device="cuda:0", median=cuda, seed=2,
                                                         device_name="Test GPU"),
                           case(mode="eval", median=cpu / 2, batch_size=1000, seed=3)],
                  machine=machine, created_at=created_at)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelbench: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
