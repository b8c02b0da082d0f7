"""Two accelbench processes writing one history database at the same time lose nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from accelbench.store.history import HistoryDB

WRITER = """
import sys
from accelbench.results import CaseResult, RunRecord
from accelbench.store.history import HistoryDB
prefix, path = sys.argv[1], sys.argv[2]
for i in range(25):
    record = RunRecord(run_id=f"{prefix}{i:04d}", created_at="2026-01-01T00:00:00+00:00",
                       accelbench_version="0.1.0", environment={"machine": {"hostname": prefix}},
                       cases=[CaseResult(workload="mnist", mode="train", device="cpu", batch_size=64,
                                         step_times=[0.1, 0.2, 0.1, 0.1])])
    with HistoryDB(__import__("pathlib").Path(path), lock_timeout_s=30) as db:
        db.add_record(record)
"""


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    HistoryDB(path).close()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, prefix, str(path)])
               for prefix in ("aaaa", "bbbb")]
    assert [w.wait(timeout=300) for w in writers] == [0, 0]
    with HistoryDB(path) as db:
        ids = {row.run_id for row in db.list_runs()}
    assert len(ids) == 50
    assert {i[:4] for i in ids} == {"aaaa", "bbbb"}
