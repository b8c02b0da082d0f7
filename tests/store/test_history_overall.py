"""Issue 33, one truth for each protocol's figure: a run's figures across cases (MLPerf Client's
overall geometric means, ``RunRecord.protocol_overall``) reach the history as the record stores
them: a table of their own (history version 7), read back by ``get`` (so ``export`` from the
history has them), listed with each run by ``history`` and its ``--json``; a database from before
gains them when opened, computed once from its stored cases. The planted figures are ones no case
of the record could give: a surface that recomputed them from the categories would fail."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

from conftest import rendered_text
from test_protocol_figures import _record

from accelbench.render.format import format_rate, format_seconds
from accelbench.render.history_table import overall_table
from accelbench.render.json_views import history_json
from accelbench.results import RunRecord
from accelbench.results.protocol_summary import mlperf_client_overall
from accelbench.store.history import DB_VERSION, HistoryDB
from accelbench.store.jsonfile import save_record

#: Stored figures far from what the record's categories give (0.0777 s, 12,345.6 tokens/s).
PLANTED = {"mlperf_ttft_geomean_s": 0.0777, "mlperf_token_rate_geomean": 12345.6}


def planted(run_id: str = "run-a") -> RunRecord:
    """A run of every protocol whose stored MLPerf Client overall figures are PLANTED."""
    record = _record(run_id, 1)
    (computed,) = mlperf_client_overall(record.cases)
    assert computed.ttft_s != PLANTED["mlperf_ttft_geomean_s"]
    record.protocol_overall = [replace(computed, **PLANTED)]
    return record


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_history_keeps_and_lists_the_stored_overall_figures(tmp_path: Path) -> None:
    record, other = planted(), _record("run-b", 2)  # run-b: none stored, computed once as stored
    path = tmp_path / "h.sqlite"
    with HistoryDB(path) as db:
        db.add_record(record)
        db.add_record(other)
        back, rows = db.get("run-a"), db.list_runs()
    assert back.protocol_overall == record.protocol_overall
    (computed,) = mlperf_client_overall(other.cases)
    assert [list(row.protocol_overall) for row in rows] == [record.protocol_overall, [computed]]
    listed = json.loads(history_json(path, rows, None, None))["runs"]
    assert [run["protocol_overall"] for run in listed] == [[record.protocol_overall[0].to_dict()],
                                                            [computed.to_dict()]]
    table = overall_table(rows)
    assert table is not None
    text = _flat(rendered_text(table))
    categories = len(computed.categories)
    assert f"run-a llama-1b cpu fp32 {categories} 77.7 ms 12,346 tokens/s" in text
    assert (f"run-b llama-1b cpu fp32 {categories} {format_seconds(computed.ttft_s)} "
            f"{format_rate(computed.token_rate)} tokens/s") in text


def test_a_run_without_figures_across_cases_stores_none(tmp_path: Path) -> None:
    plain = replace(_record("plain", 1), cases=_record("plain", 1).cases[:3])  # llama-bench, gpt-fast
    with HistoryDB(tmp_path / "h.sqlite") as db:
        db.add_record(plain)
        assert db.get("plain").protocol_overall is None
        (row,) = db.list_runs()
    assert row.protocol_overall == () and overall_table([row]) is None


def test_an_older_history_gains_its_runs_overall_figures_when_opened(tmp_path: Path) -> None:
    """A version-6 database (no protocol_overall table) is upgraded in place; its MLPerf Client
    runs get their figures, computed from their stored cases as a run computes them."""
    path = tmp_path / "h.sqlite"
    record, plain = _record("run-a", 1), replace(_record("plain", 2), cases=_record("plain", 2).cases[:3])
    with HistoryDB(path) as db:
        db.add_record(record)
        db.add_record(plain)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE protocol_overall")
    conn.execute("UPDATE schema_version SET version = 6")
    conn.commit()
    conn.close()
    with HistoryDB(path) as db:
        assert db._version() == DB_VERSION == 7
        rows = {row.run_id: row for row in db.list_runs()}
        back = db.get("run-a")
        assert db.get("plain").protocol_overall is None
    assert back.protocol_overall == mlperf_client_overall(record.cases)
    assert list(rows["run-a"].protocol_overall) == back.protocol_overall
    assert rows["plain"].protocol_overall == ()


def test_history_and_export_commands_read_the_stored_figures(inline_cli: Any, tmp_path: Path) -> None:
    """The commands, over a real database: ``import`` stores the run's figures, ``history`` lists
    them under its runs (and in --json), ``export`` of the stored run writes them."""
    record = planted()
    done = inline_cli("import", str(save_record(record, tmp_path / "run-a.json")))
    assert done.returncode == 0, done.stderr
    shown = inline_cli("history")
    assert shown.returncode == 0, shown.stderr
    assert "Protocol figures across cases" in shown.stdout
    categories = len(record.protocol_overall[0].categories)
    assert f"run-a llama-1b cpu fp32 {categories} 77.7 ms 12,346 tokens/s" in _flat(shown.stdout)
    (run,) = json.loads(inline_cli("history", "--json").stdout)["runs"]
    (stored,) = run["protocol_overall"]
    assert (stored["mlperf_ttft_geomean_s"], stored["mlperf_token_rate_geomean"]) == (0.0777, 12345.6)
    exported = json.loads(inline_cli("export", "run-a", "--format", "json").stdout)
    assert exported["protocol_overall"] == [stored]
