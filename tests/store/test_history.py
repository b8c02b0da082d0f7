"""The SQLite history: lossless round trip, queries, migrations, and bad files (real SQLite files)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest_report import assert_one_line_error, case, cpu_and_cuda, record

from accelbench.cli import main
from accelbench.errors import UsageError
from accelbench.results import Parity
from accelbench.store import history
from accelbench.store.history import DB_VERSION, HistoryDB
from accelbench.store.jsonfile import save_record


@pytest.fixture
def db(tmp_path: Path):
    with HistoryDB(tmp_path / "h.sqlite") as opened:
        yield opened


def test_round_trip_is_lossless_and_idempotent(db: HistoryDB) -> None:
    original = cpu_and_cuda("abc123")
    original.cases[0].parity = Parity("non-finite", steps=[1, 2], candidate=[0.5, None],
                                      reference=[0.5, 0.4], first_bad_step=2)
    assert db.add_record(original) == "abc123"
    assert db.add_record(original) == "abc123"
    assert len(db.list_runs()) == 1
    assert db.get("abc123").to_dict() == original.to_dict()
    assert db.get("abc").run_id == "abc123"  # a unique prefix is enough


def test_default_path_is_in_the_data_home(accelbench_home: Path) -> None:
    with HistoryDB() as opened:
        assert opened.path == accelbench_home / "history.sqlite"
    assert (accelbench_home / "history.sqlite").is_file()


def test_wal_mode(db: HistoryDB) -> None:
    assert db._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_unknown_and_ambiguous_prefixes(db: HistoryDB) -> None:
    db.add_record(cpu_and_cuda("aa1"))
    db.add_record(cpu_and_cuda("aa2"))
    with pytest.raises(UsageError, match="no stored run"):
        db.get("zz")
    with pytest.raises(UsageError, match="ambiguous"):
        db.get("aa")
    with pytest.raises(UsageError, match="no stored run"):
        db.get("a%")  # LIKE wildcards in a prefix are literal characters


def test_list_runs_filters(db: HistoryDB) -> None:
    db.add_record(cpu_and_cuda("r1", machine="alpha", created_at="2025-01-01T00:00:00+00:00"))
    db.add_record(record("r2", [case(workload="resnet50")], machine="Beta",
                         created_at="2025-03-01T00:00:00+00:00"))
    db.add_record(record("r3", [case(status="oom", error="out of memory", step_times=[])],
                         machine="beta", created_at="2025-02-01T12:00:00Z"))
    assert [r.run_id for r in db.list_runs()] == ["r1", "r3", "r2"]  # oldest first
    assert [r.run_id for r in db.list_runs(workload="resnet50")] == ["r2"]
    assert [r.run_id for r in db.list_runs(device="cuda")] == ["r1"]
    assert [r.run_id for r in db.list_runs(device="cuda:0")] == ["r1"]
    assert [r.run_id for r in db.list_runs(machine="BET")] == ["r3", "r2"]
    assert [r.run_id for r in db.list_runs(since="2025-02-01")] == ["r3", "r2"]
    assert [r.run_id for r in db.list_runs(limit=1)] == ["r2"]
    first = db.list_runs()[0]
    assert first.devices == ("cpu", "cuda:0") and first.statuses == {"ok": 3}
    assert db.list_runs(machine="beta")[0].statuses == {"oom": 1}
    with pytest.raises(UsageError, match="not a date"):
        db.list_runs(since="yesterday")


def test_timeline(db: HistoryDB) -> None:
    db.add_record(cpu_and_cuda("late", cpu=0.2, created_at="2025-05-01T00:00:00+00:00"))
    db.add_record(cpu_and_cuda("early", cpu=0.1, created_at="2025-01-01T00:00:00+00:00"))
    points = db.timeline("mnist", "train", device="cpu")
    assert [p.run_id for p in points] == ["early", "late"]
    assert points[0].throughput > points[1].throughput
    assert len(db.timeline("mnist", "train")) == 4
    assert db.timeline("mnist", "train", machine="nowhere") == []
    db.add_record(record("check1", [case()], kind="check"))
    assert len(db.timeline("mnist", "train")) == 4  # a parity check's case is not a timing


def _version_1_database(path: Path) -> None:
    """A database as accelbench wrote it at history version 1 (before the size column)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    history._MIGRATIONS[0](conn)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (1)")
    old = record("old1", [case(size="tiny")], created_at="2024-06-01T00:00:00+00:00")
    conn.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (old.run_id, old.created_at, old.kind, "box", "0.0.9", 1, "[]",
                  json.dumps(old.environment), "{}"))
    c = old.cases[0]
    conn.execute("INSERT INTO cases VALUES (?, 0, ?, 1, ?, ?, '', 'fp32', ?, 'synthetic', 'ok', '', "
                 "640.0, 0.1, ?)", (old.run_id, c.workload, c.mode, c.device, c.batch_size,
                                    json.dumps(c.to_dict())))
    conn.execute("COMMIT")
    conn.close()


def test_version_1_database_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _version_1_database(path)
    with HistoryDB(path) as db:
        assert db._version() == DB_VERSION == 7
        size = db._conn.execute("SELECT size FROM cases WHERE run_id = 'old1'").fetchone()[0]
        assert size == "tiny"  # filled from the stored case JSON
        assert db.get("old1").cases[0].size == "tiny"
        db.add_record(cpu_and_cuda("new1"))
        assert [r.run_id for r in db.list_runs()] == ["old1", "new1"]


def test_version_2_database_gains_the_key_columns(tmp_path: Path) -> None:
    """An old history (no compile or memory-format column) upgrades in place; the key columns are
    filled from each row's stored JSON, so old eager and compiled runs become separate series."""
    path = tmp_path / "v2.sqlite"
    _version_1_database(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    history._MIGRATIONS[1](conn)
    conn.execute("UPDATE schema_version SET version = 2")
    compiled = case(compile_backend="inductor", channels_last=True, median=0.05)
    conn.execute("INSERT INTO cases (run_id, position, workload, workload_version, mode, device, "
                 "device_name, precision, batch_size, data, status, error, throughput, median_step_s, "
                 "case_json, size) VALUES ('old1', 1, 'mnist', 1, 'train', 'cpu', '', 'fp32', 64, "
                 "'synthetic', 'ok', '', 1280.0, 0.05, ?, 'published')", (json.dumps(compiled.to_dict()),))
    conn.execute("COMMIT")
    conn.close()
    with HistoryDB(path) as db:
        assert db._version() == DB_VERSION
        rows = db._conn.execute("SELECT position, compile_backend, channels_last, config_key FROM cases "
                                "WHERE run_id = 'old1' ORDER BY position").fetchall()
        assert [r[1:3] for r in rows] == [("", 0), ("inductor", 1)]
        assert json.loads(rows[1][3])["compile_backend"] == "inductor"
        points = db.timeline("mnist", "train")
    assert len({p.config_key for p in points}) == 2
    assert {p.config for p in points} == {"fp32 tiny batch 64",
                                          "fp32 compile:inductor channels-last batch 64"}


def test_timeline_series_follow_the_comparability_key(db: HistoryDB, capsys) -> None:
    from rich.console import Console

    from accelbench.render.history_table import timeline_table

    for run_id, precision in (("f1", "fp32"), ("b1", "bf16"), ("f2", "fp32")):
        db.add_record(record(run_id, [case(precision=precision)]))
    points = db.timeline("mnist", "train")
    console = Console(width=200)
    with console.capture() as captured:
        console.print(timeline_table("mnist", "train", points))
    lines = [line for line in captured.get().splitlines() if "box" in line]
    assert len(lines) == 2  # fp32 (2 runs) and bf16 (1 run), never one line
    assert any("bf16" in line and " 1 " in line for line in lines)
    assert any("fp32" in line and " 2 " in line for line in lines)


def test_changes_between_noisy_figures_are_called_noisy(db: HistoryDB) -> None:
    """history's "16.6 -> 1,445 +8589.7%": a change to or from a figure that is noise (a busy
    machine, a noisy spread, an interval wider than the figure) reads "noisy", not a percent."""
    from conftest import rendered_text

    from accelbench.render.history_table import timeline_table

    def stored(run_id: str, when: str, median: float, steps: list[float] | None = None,
               load: float | None = None) -> None:
        made = record(run_id, [case(median=median, **({"step_times": steps} if steps else {}))],
                      created_at=f"2025-0{when}-01T00:00:00+00:00")
        if load is not None:
            made.environment["power"] = {"load_per_cpu": {"value": load}}
        db.add_record(made)

    def change() -> str:
        text = rendered_text(timeline_table("mnist", "train", db.timeline("mnist", "train")), 120)
        row = next(line for line in text.splitlines() if "box" in line)
        return row.split()[-2]

    stored("quiet1", "1", 0.1, load=0.1)
    stored("quiet2", "2", 0.08, load=0.1)
    assert change() == "+25.0%" and not any(p.noisy for p in db.timeline("mnist", "train"))
    stored("busy", "3", 0.1, load=1.9)  # began on a busy machine
    assert change() == "noisy"
    assert [p.noisy for p in db.timeline("mnist", "train")] == [False, False, True]
    stored("quiet3", "4", 0.08)
    assert change() == "+25.0%"  # the first and latest figures are both measurements again
    stored("spread", "5", 0.1, steps=[0.001, 0.5, 0.002, 0.4, 0.003, 0.3, 0.1])  # interval > figure
    assert change() == "noisy" and db.timeline("mnist", "train")[-1].noisy


def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    HistoryDB(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(UsageError, match="newer"):
        HistoryDB(path)


def test_corrupt_and_foreign_files_are_refused_unchanged(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not a database at all" * 100)
    before = corrupt.read_bytes()
    with pytest.raises(UsageError, match="corrupt or not a database"):
        HistoryDB(corrupt)
    assert corrupt.read_bytes() == before
    foreign = tmp_path / "foreign.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(UsageError, match="not an accelbench history"):
        HistoryDB(foreign)
    with pytest.raises(UsageError, match="folder"):
        HistoryDB(tmp_path)


def test_locked_database_fails_fast_and_keeps_content(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(history, "LOCK_TIMEOUT_S", 0.1)
    path = tmp_path / "h.sqlite"
    with HistoryDB(path) as db:
        db.add_record(cpu_and_cuda("first"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing
    try:
        with HistoryDB(path) as db, pytest.raises(UsageError, match="locked"):
            db.add_record(cpu_and_cuda("second"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with HistoryDB(path) as db:
        assert [r.run_id for r in db.list_runs()] == ["first"]


# --- command line -------------------------------------------------------------------------------

def test_cli_import_twice(cli, tmp_path: Path, capsys) -> None:
    save_record(cpu_and_cuda("run0001", machine="alpha"), tmp_path / "a.json")
    save_record(cpu_and_cuda("run0002", machine="beta", created_at="2025-02-02T00:00:00+00:00"),
                tmp_path / "b.json")
    first = cli("import", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert first.returncode == 0, first.stderr
    assert "imported run run0001" in first.stdout and "imported run run0002" in first.stdout
    assert main(["import", str(tmp_path / "a.json")]) == 0  # in-process: saves a torch import
    assert "already in the history; nothing to do" in capsys.readouterr().out
    with HistoryDB() as db:
        assert [r.run_id for r in db.list_runs()] == ["run0001", "run0002"]


def test_history_command_in_process(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    # Output details are checked in-process: each real subprocess pays torch's import time.
    assert main(["history"]) == 0
    assert "No runs stored yet" in capsys.readouterr().out
    with HistoryDB() as db:
        db.add_record(cpu_and_cuda("r1", machine="[red]alpha[/red]", cpu=0.1))
        db.add_record(cpu_and_cuda("r2", cpu=0.05, created_at="2025-06-01T00:00:00+00:00"))
    assert main(["history", "--workload", "mnist", "--mode", "train", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "[red]alpha[/red]" in out  # rich markup in a host name is shown as text
    assert "r1" in out and "r2" in out and "samples/s over time" in out
    assert main(["history", "--machine", "ALPHA"]) == 0
    out = capsys.readouterr().out
    assert "r1" in out and "r2" not in out
    assert main(["history", "--workload", "resnet50"]) == 0
    assert "No stored runs match" in capsys.readouterr().out
    assert main(["history", "--mode", "train"]) == 2
    assert "--mode needs --workload" in capsys.readouterr().err


def test_cli_bad_input_leaves_database_unchanged(cli, tmp_path: Path, accelbench_home: Path) -> None:
    with HistoryDB() as db:
        db.add_record(cpu_and_cuda("good1"))
    db_file = accelbench_home / "history.sqlite"
    before = db_file.read_bytes()
    save_record(cpu_and_cuda("good2"), tmp_path / "good2.json")
    (tmp_path / "bad.json").write_text('{"schema_version": 1, "run_id": ')
    result = cli("import", str(tmp_path / "good2.json"), str(tmp_path / "bad.json"))
    assert_one_line_error(result, "not valid JSON")
    assert db_file.read_bytes() == before
    with HistoryDB(db_file) as db:
        assert [r.run_id for r in db.list_runs()] == ["good1"]


def test_cli_corrupt_database(cli, tmp_path: Path, capsys) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"\x00garbage" * 500)
    before = corrupt.read_bytes()
    assert main(["history", "--db", str(corrupt)]) == 2
    assert capsys.readouterr().err.startswith("accelbench: error: history database")
    save_record(cpu_and_cuda("x1"), tmp_path / "x.json")
    assert_one_line_error(cli("import", str(tmp_path / "x.json"), "--db", str(corrupt)), "corrupt")
    assert corrupt.read_bytes() == before


def test_cli_locked_database(cli, tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with HistoryDB(path) as db:
        db.add_record(cpu_and_cuda("first"))
    save_record(cpu_and_cuda("second"), tmp_path / "s.json")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert_one_line_error(cli("import", str(tmp_path / "s.json"), "--db", str(path)), "locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with HistoryDB(path) as db:
        assert [r.run_id for r in db.list_runs()] == ["first"]
