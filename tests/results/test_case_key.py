"""Issue 35: the case's key is declared once (``results/case_key.CaseKey``) and everything keyed by
it is derived from its fields: a field added to the key in one line reaches the comparability key,
the history's columns, the shards' columns and the bundle's key, and old stores still open.

The field is added for real: a fresh interpreter loads ``case_key.py``, replaces ``CaseKey`` by a
subclass with one more field (what one new line in the class does) before anything derives from
it, then imports and uses the rest of accelbench unchanged.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

from accelbench.results import CaseResult, RunRecord
from accelbench.results.case_key import CaseKey
from accelbench.results.key import KEY_DEFAULTS, KEY_FIELDS
from accelbench.store.history import HistoryDB

#: Run in a fresh interpreter: CaseKey gains ``recipe`` (added later: omitted at its default).
WITH_A_NEW_FIELD = r'''
import dataclasses, importlib.util, json, pathlib, sqlite3, sys
import accelbench

path = pathlib.Path(accelbench.__file__).parent / "results" / "case_key.py"
spec = importlib.util.spec_from_file_location("accelbench.results.case_key", path)
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)


@dataclasses.dataclass(kw_only=True)
class CaseKey(module.CaseKey):
    recipe: str = dataclasses.field(default="", metadata=module.ADDED)


module.CaseKey = CaseKey

from accelbench.results import CaseResult, RunRecord
from accelbench.results.key import KEY_FIELDS, comparability_key, key_json
from accelbench.sharing import shards
from accelbench.sharing.build import case_line
from accelbench.sharing.bundle import dump_line
from accelbench.sharing.peer_view import peer_of
from accelbench.store.history import HistoryDB

old_db = pathlib.Path(sys.argv[1])
case = CaseResult(workload="mnist", mode="train", device="cpu", batch_size=4, recipe="fused",
                  step_times=[0.01] * 5)
record = RunRecord(run_id="new1", created_at="2026-01-02T00:00:00+00:00",
                   accelbench_version="0", cases=[case],
                   environment={"devices": [{"name": "cpu", "model": "Test CPU"}]})
out = {"fields": list(KEY_FIELDS),
       "key": dict(zip(KEY_FIELDS, comparability_key(case))),
       "key_json": json.loads(key_json(case)),
       "default_key_json": json.loads(key_json(CaseResult(workload="mnist", mode="train",
                                                          device="cpu", batch_size=4))),
       "file": CaseResult.from_dict(json.loads(json.dumps(case.to_dict()))).recipe}
with HistoryDB(old_db) as db:  # written without the field: opens, and gains its column
    db.add_record(record)
with sqlite3.connect(old_db) as conn:
    out["history"] = conn.execute(
        "SELECT run_id, recipe, config_key FROM cases ORDER BY run_id DESC").fetchall()
line = case_line(record, case, "ab" * 16)
out["bundle_key"] = line["key"]
peer = peer_of(json.loads(dump_line(line)))
row = shards.row_of(peer, line, "case")
out["shard_column"] = shards.COLUMNS.get("recipe")
out["shard_row"] = row.get("recipe")
out["shard_relation_default"] = "\"recipe\"" in shards.key_columns()
print(json.dumps(out))
'''


def test_a_field_added_to_the_key_reaches_every_derivation(tmp_path: Path) -> None:
    db_path = tmp_path / "history.sqlite"
    old = CaseResult(workload="mnist", mode="train", device="cpu", batch_size=4, step_times=[0.02] * 5)
    with HistoryDB(db_path) as db:
        db.add_record(RunRecord(run_id="old1", created_at="2026-01-01T00:00:00+00:00",
                                accelbench_version="0", cases=[old]))
    done = subprocess.run([sys.executable, "-c", WITH_A_NEW_FIELD, str(db_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["fields"] == [*KEY_FIELDS, "recipe"]
    # the comparability key and its stored string (omitted at its default: old keys unchanged)
    assert out["key"]["recipe"] == "fused" and out["key_json"]["recipe"] == "fused"
    assert "recipe" not in out["default_key_json"]
    assert out["file"] == "fused"  # the result file carries it and reads it back
    # the history: the old database opened, gained the column (its old row at the default)
    old_row, new_row = out["history"]
    assert old_row[:2] == ["old1", ""] and "recipe" not in json.loads(old_row[2])
    assert new_row[:2] == ["new1", "fused"] and json.loads(new_row[2])["recipe"] == "fused"
    # the bundle's key and the shards' columns
    assert out["bundle_key"]["recipe"] == "fused"
    assert out["shard_column"] == "VARCHAR" and out["shard_row"] == "fused"
    assert out["shard_relation_default"]


def test_the_key_tables_are_the_fields_of_case_key() -> None:
    assert tuple(spec.name for spec in fields(CaseKey)) == KEY_FIELDS
    assert KEY_DEFAULTS == {
        "workload": "", "workload_version": 1, "mode": "", "batch_size": 0, "precision": "fp32",
        "compile_backend": "", "channels_last": False, "data": "synthetic", "size": "published",
        "prompt_len": 0, "new_tokens": 0, "streamed": False, "protocol": ""}


def test_a_result_file_lists_its_head_in_the_order_files_always_had() -> None:
    """CaseResult inherits the key's fields first; the file keeps the old order all the same."""
    data = CaseResult(workload="w", mode="train", device="cpu", batch_size=2).to_dict()
    assert list(data)[:23] == [
        "workload", "mode", "device", "batch_size", "workload_version", "device_name", "precision",
        "compile_backend", "channels_last", "data", "size", "status", "error", "threads",
        "stop_rule", "dataset_size", "steps_per_epoch", "prompt_len", "new_tokens",
        "tokens_per_sample", "streamed", "protocol", "step_times"]


def test_an_old_history_gains_the_key_columns_it_lacks(tmp_path: Path) -> None:
    """A database from before a key field had its column (prompt_len ... protocol were only in
    config_key) opens, and the column is filled from each row's stored JSON."""
    path = tmp_path / "history.sqlite"
    case = CaseResult(workload="gpt2", mode="generate", device="cpu", batch_size=1, prompt_len=8,
                      new_tokens=4, protocol="llama-bench")
    with HistoryDB(path) as db:
        db.add_record(RunRecord(run_id="r1", created_at="2026-01-01T00:00:00+00:00",
                                accelbench_version="0", cases=[case]))
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE cases DROP COLUMN protocol")
        conn.execute("ALTER TABLE cases DROP COLUMN prompt_len")
    with HistoryDB(path) as db:
        assert db.get("r1").cases[0].protocol == "llama-bench"
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT prompt_len, protocol FROM cases").fetchall() == [(8, "llama-bench")]
