"""The run history: every stored run in one SQLite file, queryable by workload, device and machine.

Layout: ``runs`` holds one row per run (with the environment and options as JSON) and ``cases`` one
row per case with the columns a query filters or sorts on, plus the case's full JSON so that a run
exports back losslessly; ``probes`` holds a probe run's findings, one row per device;
``protocol_overall`` holds a run's figures across cases (MLPerf Client's overall geometric means,
results/protocol_overall.py), one row per group: they belong to the run, not to a case, and are
stored as the record holds them (a record without them, written before they were stored, has them
computed once as it is stored: ``protocol_summary.stored_overall``), never recomputed on reading.
``schema_version`` holds the layout version; ``_MIGRATIONS[v]`` turns a version-v database into
version v+1, each in its own transaction, so an old file is upgraded in place when opened and a
file from a newer accelbench is refused rather than misread.

The stored JSON keeps the result schema it was written with (``runs.record_schema``): reading a
run upgrades it through the same steps as a result file (results/schema.py), so a database
written by an older accelbench reads as current records without rewriting every row.

WAL mode lets a reader (``accelbench history``) run while ``accelbench run`` writes.
Every sqlite3 error that a user can cause (a corrupt file, a locked file, a folder instead of a
file) becomes a one-line UsageError; nothing is written unless the file opened cleanly.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from accelbench.devices.power import busy_load
from accelbench.errors import UsageError
from accelbench.files import data_home
from accelbench.results import SCHEMA_VERSION, RunRecord
from accelbench.results.key import config_label
from accelbench.results.protocol_overall import Overall
from accelbench.results.protocol_summary import stored_overall
from accelbench.results.stats import wider_than_figure
from accelbench.store.history_layout import (
    _MIGRATIONS,
    DB_VERSION,
    _insert_probes,
    _json,
    add_key_columns,
    insert_overall,
    key_row,
    missing_key_columns,
)

HISTORY_FILE = "history.sqlite"
#: Seconds to wait for another process's write lock before reporting the database as locked.
LOCK_TIMEOUT_S = 2.0


def default_db_path() -> Path:
    return data_home() / HISTORY_FILE




@dataclass(frozen=True)
class RunSummaryRow:
    run_id: str
    created_at: str
    kind: str
    machine: str
    accelbench_version: str
    workloads: tuple[str, ...]
    devices: tuple[str, ...]
    statuses: dict[str, int] = field(default_factory=dict)
    #: The run's stored figures across cases (MLPerf Client's overall), as its record holds them.
    protocol_overall: tuple[Overall, ...] = ()


@dataclass(frozen=True)
class TimelinePoint:
    created_at: str
    throughput: float | None
    run_id: str
    machine: str
    device: str
    batch_size: int
    status: str
    #: The comparability key (results/key.py) as stored: points with different keys are different
    #: series, never one line.
    config_key: str = ""
    #: The figure is noise, not a measurement (``noisy_figure``): a change to or from it is no
    #: change anyone measured.
    noisy: bool = False

    @property
    def config(self) -> str:
        """The key's configuration as a short label ("bf16 compile:eager batch 64")."""
        return config_label(json.loads(self.config_key)) if self.config_key else ""


def parse_time(text: str) -> datetime:
    """ISO 8601 date or date-time; naive values are taken as UTC so that comparisons work."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{text!r} is not a date; use YYYY-MM-DD or an ISO date-time") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


class HistoryDB:
    """The history database; use as a context manager or call ``close()``."""

    def __init__(self, path: Path | None = None, create: bool = True,
                 lock_timeout_s: float | None = None) -> None:
        """``lock_timeout_s``: how long to wait for another writer (default ``LOCK_TIMEOUT_S``);
        ``accelbench run`` may want longer, since failing to store a finished run is costly."""
        self.path = Path(path) if path is not None else default_db_path()
        if self.path.is_dir():
            raise UsageError(f"history database {self.path} is a folder, not a file")
        if not self.path.exists():
            if not create:
                raise UsageError(f"history database {self.path} does not exist")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise UsageError(f"cannot create the folder of {self.path}: {error}") from None
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None,
                                         timeout=LOCK_TIMEOUT_S if lock_timeout_s is None else lock_timeout_s)
        except sqlite3.Error as error:
            raise UsageError(f"cannot open history database {self.path}: {error}") from None
        try:
            with self._guard("open"):
                self._check_and_migrate()
                self._conn.execute("PRAGMA foreign_keys = ON")
                self._conn.execute("PRAGMA journal_mode = WAL")
        except UsageError:
            self._conn.close()
            raise

    # --- plumbing -------------------------------------------------------------------------------
    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as error:
            text = str(error)
            if "locked" in text or "busy" in text:
                raise UsageError(f"history database {self.path} is locked by another process "
                                 f"(could not {action}); try again when it finishes") from None
            raise UsageError(f"history database {self.path}: cannot {action}: {text}") from None
        except sqlite3.DatabaseError as error:
            raise UsageError(f"history database {self.path} is corrupt or not a database "
                             f"({error}); move it away to start a new history") from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # BEGIN IMMEDIATE takes the write lock up front: a concurrent writer fails at once with
        # "locked" instead of half-way through, and a failure rolls back to the old content.
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _version(self) -> int:
        has_table = self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone()
        if not has_table:
            tables = self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise UsageError(f"{self.path} is an SQLite file but not an accelbench history")
            return 0
        row = self._conn.execute("SELECT version FROM schema_version").fetchone()
        return int(row[0]) if row else 0

    def _check_and_migrate(self) -> None:
        version = self._version()
        if version > DB_VERSION:
            raise UsageError(f"history database {self.path} has version {version}, newer than this "
                             f"accelbench reads (<= {DB_VERSION}); upgrade accelbench")
        while version < DB_VERSION:
            with self._transaction() as conn:
                _MIGRATIONS[version](conn)
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                conn.execute("DELETE FROM schema_version")
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version + 1,))
            version += 1
        missing = missing_key_columns(self._conn)
        if missing:
            with self._transaction() as conn:
                add_key_columns(conn, missing)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> HistoryDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing --------------------------------------------------------------------------------
    def contains(self, run_id: str) -> bool:
        with self._guard("read"):
            return self._conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None

    def add_record(self, record: RunRecord) -> str:
        """Store ``record``; a run already stored (same run_id) is left as it is."""
        with self._guard("store the run"), self._transaction() as conn:
            exists = conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (record.run_id,)).fetchone()
            if exists:
                return record.run_id
            conn.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record.run_id, record.created_at, record.kind, record_hostname(record),
                 record.accelbench_version, SCHEMA_VERSION, _json(record.command),
                 _json(record.environment), _json(record.options.to_dict())))
            for position, case in enumerate(record.cases):
                summary = case.summary()
                # The key's columns (one per key field, and config_key) follow the key's fields.
                row = {"run_id": record.run_id, "position": position, "device": case.device,
                       "device_name": case.device_name, "status": case.status, "error": case.error,
                       "throughput": case.throughput(),
                       "median_step_s": summary.median if summary else None,
                       "case_json": _json(case.to_dict()), **key_row(case)}
                conn.execute(f"INSERT INTO cases ({', '.join(map(_quoted, row))}) "
                             f"VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
            _insert_probes(conn, record.run_id, [probe.to_dict() for probe in record.probes])
            # As the record stores them; one written before they were stored has them computed once, here.
            insert_overall(conn, record.run_id, stored_overall(record))
        return record.run_id

    # --- reading --------------------------------------------------------------------------------
    def resolve(self, prefix: str) -> str:
        """The full run id for a unique prefix; a UsageError when none or several match."""
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._guard("read"):
            ids = [row[0] for row in self._conn.execute(
                "SELECT run_id FROM runs WHERE run_id LIKE ? ESCAPE '\\' ORDER BY run_id LIMIT 6",
                (pattern,))]
        if prefix in ids:
            return prefix
        if not ids or not prefix:
            raise UsageError(f"no stored run has the id {prefix!r} (see 'accelbench history')")
        if len(ids) > 1:
            raise UsageError(f"run id prefix {prefix!r} is ambiguous: {', '.join(ids[:5])}...")
        return ids[0]

    def get(self, run_id: str) -> RunRecord:
        run_id = self.resolve(run_id)
        with self._guard("read"):
            row = self._conn.execute(
                "SELECT run_id, created_at, kind, accelbench_version, record_schema, command_json, "
                "environment_json, options_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            cases = [json.loads(text) for (text,) in self._conn.execute(
                "SELECT case_json FROM cases WHERE run_id = ? ORDER BY position", (run_id,))]
            probes = [json.loads(text) for (text,) in self._conn.execute(
                "SELECT probe_json FROM probes WHERE run_id = ? ORDER BY position", (run_id,))]
            overall = [json.loads(text) for (text,) in self._conn.execute(
                "SELECT overall_json FROM protocol_overall WHERE run_id = ? ORDER BY position", (run_id,))]
        data = {"schema_version": row[4], "run_id": row[0], "created_at": row[1], "kind": row[2],
                "accelbench_version": row[3], "command": json.loads(row[5]),
                "environment": json.loads(row[6]), "options": json.loads(row[7]), "cases": cases,
                "probes": probes}
        if overall:  # the stored figures across cases (none stored: the record has none)
            data["protocol_overall"] = overall
        try:
            return RunRecord.from_dict(data)
        except UsageError as error:
            raise UsageError(f"stored run {run_id} cannot be read: {error}") from None

    def list_runs(self, workload: str | None = None, device: str | None = None,
                  machine: str | None = None, since: str | datetime | None = None,
                  kind: str | None = None, limit: int | None = None) -> list[RunSummaryRow]:
        """Stored runs, oldest first. ``device`` matches a kind ("cuda") or one device ("cuda:1");
        ``machine`` is a case-insensitive part of the host name; ``since`` an ISO date."""
        where, params = ["1 = 1"], []
        if workload:
            where.append("r.run_id IN (SELECT run_id FROM cases WHERE workload = ?)")
            params.append(workload)
        if device:
            where.append("(r.run_id IN (SELECT run_id FROM cases WHERE device = ? OR device LIKE ?) "
                         "OR r.run_id IN (SELECT run_id FROM probes WHERE device = ? OR device LIKE ?))")
            params += [device, device + ":%"] * 2
        if machine:
            where.append("lower(r.hostname) LIKE ?")
            params.append(f"%{machine.lower()}%")
        if kind:
            where.append("r.kind = ?")
            params.append(kind)
        with self._guard("read"):
            runs = self._conn.execute(
                f"SELECT run_id, created_at, kind, hostname, accelbench_version FROM runs r "
                f"WHERE {' AND '.join(where)}", params).fetchall()
            cases = self._conn.execute(
                "SELECT run_id, workload, device, status FROM cases ORDER BY run_id, position").fetchall()
            probes = self._conn.execute(
                "SELECT run_id, device, probe_json FROM probes ORDER BY run_id, position").fetchall()
            stored = self._conn.execute(
                "SELECT run_id, overall_json FROM protocol_overall ORDER BY run_id, position").fetchall()
        start = (since if isinstance(since, datetime) else parse_time(since)) if since else None
        # Per run: (workload or None, device, status) for every case, and for every probed cell
        # (a probe's statuses are its cells': works, fails, wrong, slower).
        per_run: dict[str, list[tuple[str | None, str, str]]] = {}
        for run_id, workload_name, device_name, status in cases:
            per_run.setdefault(run_id, []).append((workload_name, device_name, status))
        for run_id, device_name, probe_json in probes:
            cells = json.loads(probe_json).get("cells", {})
            per_run.setdefault(run_id, []).extend(
                (None, device_name, str(cell.get("status", "?"))) for cell in cells.values())
        overall: dict[str, list[Overall]] = {}
        for run_id, overall_json in stored:
            overall.setdefault(run_id, []).append(Overall.from_dict(json.loads(overall_json)))
        rows = []
        for run_id, created_at, run_kind, hostname, version in runs:
            if start is not None and _sort_time(created_at) < start:
                continue
            mine = per_run.get(run_id, [])
            statuses: dict[str, int] = {}
            for _, _, status in mine:
                statuses[status] = statuses.get(status, 0) + 1
            rows.append(RunSummaryRow(run_id, created_at, run_kind, hostname, version,
                                      _unique(c[0] for c in mine if c[0] is not None),
                                      _unique(c[1] for c in mine), statuses,
                                      tuple(overall.get(run_id, ()))))
        rows.sort(key=lambda r: (_sort_time(r.created_at), r.run_id))
        return rows[-limit:] if limit else rows

    def timeline(self, workload: str, mode: str, device: str | None = None,
                 machine: str | None = None) -> list[TimelinePoint]:
        """Throughput of one workload and mode over time, one point per timed case, oldest first
        (parity checks and probes are left out: their cases are not timings)."""
        sql = ("SELECT r.created_at, c.throughput, r.run_id, r.hostname, c.device, c.batch_size, c.status, "
               "c.config_key, c.case_json, r.environment_json "
               "FROM cases c JOIN runs r ON r.run_id = c.run_id "
               "WHERE r.kind = 'run' AND c.workload = ? AND c.mode = ?")
        params: list[Any] = [workload, mode]
        if device:
            sql += " AND (c.device = ? OR c.device LIKE ?)"
            params += [device, device + ":%"]
        if machine:
            sql += " AND lower(r.hostname) LIKE ?"
            params.append(f"%{machine.lower()}%")
        with self._guard("read"):
            rows = self._conn.execute(sql, params).fetchall()
        # The first eight columns are the point's first eight fields; the last two judge it noisy.
        points = [replace(TimelinePoint(*row[:-2]),
                          noisy=noisy_figure(json.loads(row[-2]), json.loads(row[-1])))
                  for row in rows]
        points.sort(key=lambda p: (_sort_time(p.created_at), p.run_id))
        return points


def noisy_figure(case: dict[str, Any], environment: Any) -> bool:
    """Whether a stored case's rate is noise rather than a measurement: its run began on a busy
    machine (devices/power.busy_load), its samples spread past the noisy mark (the run table's
    "noisy"), or its 95% interval is wider than the figure (shown as a range, never as ±%)."""
    if busy_load(environment) is not None:
        return True
    derived = case.get("derived") or {}
    generation = case.get("generation") or {}
    if generation.get("noisy") or (derived.get("stats") or {}).get("noisy"):
        return True
    rate, interval = derived.get("throughput_samples_per_s"), derived.get("throughput_ci")
    return (isinstance(rate, int | float) and rate > 0 and isinstance(interval, list)
            and len(interval) == 2 and wider_than_figure(rate, *interval))


def _quoted(name: str) -> str:
    return f'"{name}"'


def record_hostname(record: RunRecord) -> str:
    machine = record.environment.get("machine", {})
    return str(machine.get("hostname", "")) if isinstance(machine, dict) else ""


def _unique(values: Iterator[str] | Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def _sort_time(text: str) -> datetime:
    try:
        return parse_time(text)
    except UsageError:
        # A stored date that does not parse sorts first rather than breaking every listing.
        return datetime.min.replace(tzinfo=timezone.utc)
