"""The history database's layout: its versions and the migrations between them.

``_MIGRATIONS[v]`` turns a version-v database into version v+1 inside the caller's transaction
(see HistoryDB._check_and_migrate). A released migration is never edited: a database written by any
older accelbench must reach today's layout through the same steps. The key's columns are the
exception: one per field of the comparability key (``fields(CaseKey)``, results/case_key.py), added
by :func:`add_key_columns` whenever the key has a field the table lacks, after the numbered steps.

A run's figures across cases (MLPerf Client's overall) are a table of their own (version 7), not
columns of ``runs``: a run holds one group of them per model, device, precision and compile, and a
run of no protocol holds none. A new figure across cases needs no layout change beyond a column,
since each row keeps the group's whole stored JSON (``overall_json``), which is what is read back.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from accelbench.errors import UsageError
from accelbench.results import CaseResult
from accelbench.results.generation import Generation
from accelbench.results.key import KEY_DEFAULTS, KEY_FIELDS, comparability_key, key_json
from accelbench.results.protocol_overall import Overall
from accelbench.results.protocol_summary import mlperf_client_overall
from accelbench.results.schema import upgrade
from accelbench.store.jsonfile import clean_for_json


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    # Not executescript(): it commits first, which would break the migration's transaction.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _migrate_0_to_1(conn: sqlite3.Connection) -> None:
    _run_script(conn, """
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            kind TEXT NOT NULL,
            hostname TEXT NOT NULL,
            accelbench_version TEXT NOT NULL,
            record_schema INTEGER NOT NULL,
            command_json TEXT NOT NULL,
            environment_json TEXT NOT NULL,
            options_json TEXT NOT NULL
        );
        CREATE TABLE cases (
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            workload TEXT NOT NULL,
            workload_version INTEGER NOT NULL,
            mode TEXT NOT NULL,
            device TEXT NOT NULL,
            device_name TEXT NOT NULL,
            precision TEXT NOT NULL,
            batch_size INTEGER NOT NULL,
            data TEXT NOT NULL,
            status TEXT NOT NULL,
            error TEXT NOT NULL,
            throughput REAL,
            median_step_s REAL,
            case_json TEXT NOT NULL,
            PRIMARY KEY (run_id, position)
        );
    """)


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    # Version 2: the workload size is part of comparability, so it gets a column (filled from the
    # stored JSON of existing rows), and timelines query by workload/mode/device often enough to
    # deserve an index.
    conn.execute("ALTER TABLE cases ADD COLUMN size TEXT NOT NULL DEFAULT 'published'")
    rows = conn.execute("SELECT run_id, position, case_json FROM cases").fetchall()
    for run_id, position, case_json in rows:
        size = json.loads(case_json).get("size", "published")
        conn.execute("UPDATE cases SET size = ? WHERE run_id = ? AND position = ?",
                     (str(size), run_id, position))
    conn.execute("CREATE INDEX cases_by_workload ON cases (workload, mode, device)")


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    # Version 3: the one comparability key (results/key.py) as columns, so that a timeline never
    # draws fp32 and bf16, or eager and compiled, as one line. Filled from each row's stored JSON
    # with the same key function the comparisons use.
    conn.execute("ALTER TABLE cases ADD COLUMN compile_backend TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE cases ADD COLUMN channels_last INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE cases ADD COLUMN config_key TEXT NOT NULL DEFAULT ''")
    rows = conn.execute("SELECT run_id, position, case_json FROM cases").fetchall()
    for run_id, position, case_json in rows:
        stored = json.loads(case_json)
        conn.execute("UPDATE cases SET compile_backend = ?, channels_last = ?, config_key = ? "
                     "WHERE run_id = ? AND position = ?",
                     (*_key_columns(stored), run_id, position))


def _key_columns(case: Any) -> tuple[str, int, str]:
    """compile_backend, channels_last and config_key of a CaseResult or stored dict."""
    values = dict(zip(KEY_FIELDS, comparability_key(case), strict=True))
    return str(values["compile_backend"]), int(bool(values["channels_last"])), key_json(case)


def _migrate_3_to_4(conn: sqlite3.Connection) -> None:
    # Version 4 (result schema 2): a probe run is no longer fake cases (workload "features") but
    # per-device probes, in a table of their own. Old probe runs move there through the result
    # upgrade to schema 2 (and are marked so); every other run keeps its stored JSON.
    _run_script(conn, """
        CREATE TABLE probes (
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            device TEXT NOT NULL,
            device_name TEXT NOT NULL,
            probe_json TEXT NOT NULL,
            PRIMARY KEY (run_id, position)
        )
    """)
    old = conn.execute("SELECT run_id, record_schema FROM runs WHERE kind = 'probe' AND record_schema < 2")
    for run_id, record_schema in old.fetchall():
        cases = [json.loads(text) for (text,) in conn.execute(
            "SELECT case_json FROM cases WHERE run_id = ? ORDER BY position", (run_id,))]
        data = upgrade({"schema_version": record_schema, "kind": "probe", "cases": cases}, target=2)
        _insert_probes(conn, run_id, data["probes"])
        conn.execute("DELETE FROM cases WHERE run_id = ?", (run_id,))
        conn.execute("UPDATE runs SET record_schema = 2 WHERE run_id = ?", (run_id,))


def _insert_probes(conn: sqlite3.Connection, run_id: str, probes: list[dict[str, Any]]) -> None:
    for position, probe in enumerate(probes):
        conn.execute("INSERT INTO probes VALUES (?, ?, ?, ?, ?)",
                     (run_id, position, str(probe.get("device", "")), str(probe.get("device_name", "")),
                      _json(probe)))


def _migrate_4_to_5(conn: sqlite3.Connection) -> None:
    # Version 5: a generation case's stored throughput is the figure its generation table showed,
    # decode tokens/s over the batch (results/catalogue.py), not batch / the median per-token
    # time (which read up to 3.6x apart). Old rows take it from their stored generation figures.
    rows = conn.execute("SELECT run_id, position, case_json FROM cases WHERE mode = 'generate'")
    for run_id, position, case_json in rows.fetchall():
        generation = json.loads(case_json).get("generation") or {}
        rate = generation.get("decode_tokens_per_s_total") if isinstance(generation, dict) else None
        conn.execute("UPDATE cases SET throughput = ? WHERE run_id = ? AND position = ?",
                     (rate if isinstance(rate, int | float) else None, run_id, position))


def _migrate_5_to_6(conn: sqlite3.Connection) -> None:
    # Version 6: a --protocol generation case's stored throughput is the rate its peer publishes
    # (results/catalogue.headline: llama-bench's pp or tg mean, gpt-fast's tokens/s, MLPerf
    # Client's 2nd+ token rate), what its table shows, not accelbench's own median; a pp case (no
    # decode step) had none. Read from the stored protocol section, as a new row is.
    rows = conn.execute("SELECT run_id, position, case_json FROM cases WHERE mode = 'generate'")
    for run_id, position, case_json in rows.fetchall():
        data = json.loads(case_json)
        generation, protocol = data.get("generation"), data.get("protocol")
        if not protocol or not isinstance(generation, dict):
            continue
        case = CaseResult(workload=str(data.get("workload", "")), mode="generate", device="",
                          batch_size=1, protocol=str(protocol), new_tokens=int(data.get("new_tokens") or 0),
                          generation=Generation.from_dict(generation, "generation"))
        conn.execute("UPDATE cases SET throughput = ? WHERE run_id = ? AND position = ?",
                     (case.throughput(), run_id, position))


def _migrate_6_to_7(conn: sqlite3.Connection) -> None:
    # Version 7: a run's figures across cases (results/protocol_overall.py: MLPerf Client's
    # overall geometric means) belong to the run, not to one case: a table of their own, a row per
    # group, its figures as columns (by their catalogue names) and the group's stored JSON. Runs
    # stored before held none: theirs are computed here from their stored cases, by the function
    # that computes them when a run's cases are in, so that every stored run reads them alike.
    _run_script(conn, """
        CREATE TABLE IF NOT EXISTS protocol_overall (
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            protocol TEXT NOT NULL,
            label TEXT NOT NULL,
            device TEXT NOT NULL,
            mlperf_ttft_geomean_s REAL,
            mlperf_token_rate_geomean REAL,
            overall_json TEXT NOT NULL,
            PRIMARY KEY (run_id, position)
        )
    """)
    # (IF NOT EXISTS, and only runs without rows: a database whose version was set back by hand
    # keeps the rows its runs were stored with.)
    runs = conn.execute("SELECT DISTINCT r.run_id, r.record_schema, r.kind FROM runs r JOIN cases c "
                        "ON c.run_id = r.run_id WHERE c.mode = 'generate' AND c.case_json LIKE ? "
                        "AND r.run_id NOT IN (SELECT run_id FROM protocol_overall)",
                        ("%mlperf-client%",)).fetchall()
    for run_id, record_schema, kind in runs:
        cases = [json.loads(text) for (text,) in conn.execute(
            "SELECT case_json FROM cases WHERE run_id = ? ORDER BY position", (run_id,))]
        data = upgrade({"schema_version": record_schema, "kind": kind, "cases": cases})
        try:
            read = [CaseResult.from_dict(case, f"cases[{i}]") for i, case in enumerate(data["cases"])]
        except UsageError:
            continue  # unreadable here, unreadable by get() too: nothing to say about it
        insert_overall(conn, run_id, mlperf_client_overall(read))


def insert_overall(conn: sqlite3.Connection, run_id: str, groups: Sequence[Overall]) -> None:
    """A run's figures across cases, a row per group, in the record's order."""
    for position, group in enumerate(groups):
        conn.execute("INSERT INTO protocol_overall VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (run_id, position, group.protocol, group.label, group.device,
                      group.mlperf_ttft_geomean_s, group.mlperf_token_rate_geomean,
                      _json(group.to_dict())))


_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    0: _migrate_0_to_1, 1: _migrate_1_to_2, 2: _migrate_2_to_3, 3: _migrate_3_to_4,
    4: _migrate_4_to_5, 5: _migrate_5_to_6, 6: _migrate_6_to_7}
DB_VERSION = len(_MIGRATIONS)


# --- the key's columns (derived, not numbered) -------------------------------------------------------
#: A key field's column type, from its default's type (results/case_key.py).
_SQL_TYPES = {bool: "INTEGER", int: "INTEGER", str: "TEXT"}


def key_row(case: Any) -> dict[str, Any]:
    """The key's columns of a CaseResult or stored case dict: every key field by its name, and
    ``config_key`` (the key as one string, what timelines match on)."""
    return {**dict(zip(KEY_FIELDS, comparability_key(case), strict=True)), "config_key": key_json(case)}


def missing_key_columns(conn: sqlite3.Connection) -> list[str]:
    """The key fields the cases table has no column for (fields added to the key since)."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(cases)")}
    return [name for name in KEY_FIELDS if name not in present]


def add_key_columns(conn: sqlite3.Connection, names: list[str]) -> None:
    """A column for each key field of ``names``, filled from every row's stored JSON with the key
    function the comparisons use (a row from before the field holds its default). Not a numbered
    migration: the key columns follow ``fields(CaseKey)``, so a field added to the key is a column
    the next time a database is opened, with no step to write."""
    for name in names:
        default = KEY_DEFAULTS[name]
        literal = f"'{default}'" if isinstance(default, str) else str(int(default))
        conn.execute(f'ALTER TABLE cases ADD COLUMN "{name}" {_SQL_TYPES[type(default)]} '
                     f"NOT NULL DEFAULT {literal}")
    assign = ", ".join(f'"{name}" = ?' for name in names)
    rows = conn.execute("SELECT run_id, position, case_json FROM cases").fetchall()
    for run_id, position, case_json in rows:
        row = key_row(json.loads(case_json))
        conn.execute(f"UPDATE cases SET {assign} WHERE run_id = ? AND position = ?",
                     (*(row[name] for name in names), run_id, position))


def _json(value: Any) -> str:
    # Same NaN policy as the JSON files: a NaN would make the stored JSON unreadable.
    return json.dumps(clean_for_json(value), allow_nan=False, sort_keys=False)
