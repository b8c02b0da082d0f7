"""``accelbench hub compact SOURCE... -o DIR``: bundles to Parquet shards (``sharing/shards.py``).

Every line is read as ``compare --against`` reads it (``sharing/sources.parse_result``: the hash
recomputed, the version upgraded, the key, device and headline checked) and refused with its
reason when it cannot be used. Then, over everything read:

* every signed line's signature is verified (``sharing/signing.py``); one that does not hold is
  refused, and so is an unsigned line under a machine id that a signed line holds (forged);
* duplicates are dropped: the same content hash, or the same machine, run and case with the same
  measurement (``case_id``: one case shared again after its validity changed, or by a newer
  accelbench; ``sharing/conflicts.measurement``). The first met is kept (sources in the order
  given, files in name order, lines in order); every other is refused as a duplicate of it;
* lines of one machine and case with different measurements are a conflict: all kept and
  quarantined (``compare/outliers.CONFLICT``), none preferred, counted in the summary;
* a machine far above the others of its device model for a key is quarantined (the ``outlier``
  column says why; ``compare/outliers.mark_outliers``'s median/MAD rule and words);
* implausible lines are kept, marked (``implausible``), never in a band.

The rules over everything are ``decide.py``'s SQL.

Lines of results that did not finish are counted and left out (they hold no figure). The shards
replace an earlier compaction in DIR only once the new ones are complete. Reading is spread over
the CPUs (one bundle file per task); dropping duplicates and writing the partitions is DuckDB's.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.errors import UsageError
from accelbench.hub.decide import kept_view, quarantine, settle
from accelbench.sharing.bundle import BUNDLE_MARK, BadLine
from accelbench.sharing.loaded import lines_by_reason, quarantined_words
from accelbench.sharing.shards import (
    COLUMNS,
    COUNTS_SQL,
    MANIFEST,
    PARTITIONS,
    REFUSED,
    SHARD_VERSION,
    arrow_schema,
    duckdb_connection,
    key_columns,
    row_of,
    shard_files,
    sql_list,
)
from accelbench.sharing.signing import SIGNING_HELP, can_sign
from accelbench.sharing.sources import (
    bundle_files,
    case_identity,
    check_sources,
    documents,
    parse_result,
)

Warn = Callable[[str], None]
#: Rows per staging file a worker writes (bounds its memory: about 2 KB a row).
BATCH_ROWS = 50_000
#: Rows per row group of the shards: a reader skips a group whose key range cannot match.
ROW_GROUP_ROWS = 122_880
#: A line number field wide enough for any file: a row's order is (document, line).
_LINE_BITS = 32
#: DuckDB's memory while it drops duplicates and writes partitions (it spills beyond it).
COMPACT_MEMORY = "2GB"
NOT_A_RESULT = "not a result (the case did not finish)"


@dataclass
class Compacted:
    rows: int = 0
    lines: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    not_results: int = 0
    implausible: int = 0
    outliers: int = 0
    conflicts: int = 0
    signed: int = 0
    files: int = 0

    def summary(self) -> str:
        words = [f"{self.rows:,} result(s) in {self.files} shard(s) from {self.lines:,} line(s)"]
        if self.duplicates:
            words.append(f"{self.duplicates:,} duplicate(s) dropped")
        if self.refused:
            words.append(lines_by_reason("refused", self.refused))
        if self.not_results:
            words.append(f"{self.not_results:,} line(s) of cases that did not finish left out")
        if self.implausible:
            words.append(f"{self.implausible:,} implausible (kept, marked)")
        if self.outliers:
            words.append(quarantined_words(self.outliers, self.conflicts))
        words.append(f"{self.signed:,} signed and verified, {self.rows - self.signed:,} unsigned")
        return "; ".join(words)


# --- reading (in worker processes) -----------------------------------------------------------------
@dataclass
class _Document:
    index: int
    name: str


@dataclass
class _Read:
    index: int
    name: str
    lines: int = 0
    staged: list[str] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    not_results: int = 0


def _stage(rows: dict[str, list[Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    extra = [("source", pa.string()), ("line_no", pa.int64()), ("seq", pa.int64()), ("signed", pa.bool_())]
    schema = pa.schema([*arrow_schema(list(COLUMNS)), *extra])  # typed: a column of Nones keeps its type
    pq.write_table(pa.table(rows, schema=schema), path, compression="zstd")


def _read_lines(document: _Document, lines: Iterator[tuple[int, bytes]], staging: Path) -> _Read:
    read = _Read(document.index, document.name)
    names = [*COLUMNS, "source", "line_no", "seq", "signed"]
    rows: dict[str, list[Any]] = {name: [] for name in names}
    for number, raw in lines:
        if not raw.strip():
            continue
        read.lines += 1
        if BUNDLE_MARK not in raw:
            read.refused.append({"source": document.name, "line": number, "reason": "not a bundle line",
                                 "message": "no \"bundle\" member: not an accelbench bundle line"})
            continue
        try:
            peer, line = parse_result(raw)
            signed = "signature" in line  # verified by parse_result (cryptography is required here)
        except BadLine as bad:
            read.refused.append({"source": document.name, "line": number, "reason": bad.reason,
                                 "message": str(bad)})
            continue
        if peer is None:
            read.not_results += 1
            continue
        row = row_of(peer, line, case_identity(line))
        for name in COLUMNS:
            rows[name].append(row[name])
        rows["source"].append(document.name)
        rows["line_no"].append(number)
        rows["seq"].append((document.index << _LINE_BITS) + number)
        rows["signed"].append(signed)
        if len(rows["seq"]) >= BATCH_ROWS:
            read.staged.append(str(_flush(rows, staging, document.index, len(read.staged))))
    if rows["seq"]:
        read.staged.append(str(_flush(rows, staging, document.index, len(read.staged))))
    return read


def _flush(rows: dict[str, list[Any]], staging: Path, index: int, part: int) -> Path:
    path = staging / f"doc{index:06d}-{part:04d}.parquet"
    _stage(rows, path)
    for values in rows.values():
        values.clear()
    return path


def _read_document(task: tuple[_Document, str]) -> _Read:
    document, staging = task
    return _read_lines(document, _local_lines(document.name), Path(staging))


def _local_lines(path: str) -> Iterator[tuple[int, bytes]]:
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            yield number, raw.rstrip(b"\r\n")


def _documents(specs: list[str]) -> Iterator[tuple[_Document, Iterator[tuple[int, bytes]] | None]]:
    """Each bundle of the sources in order; local files by name (read in a worker), an address
    with its lines (read here). Shards are derived, not a source: compaction reads the bundles."""
    index = 0
    for spec in specs:
        path = Path(spec)
        if (path.is_dir() and shard_files(path) and not bundle_files(path)) or path.suffix == ".parquet":
            raise UsageError(f"source {spec} holds Parquet shards, which are derived: compact from the hub's "
                             "bundles (*.jsonl)")
        for name, lines in documents(spec):
            local = Path(name).is_file()
            yield _Document(index, name), None if local else lines
            index += 1


# --- over everything: duplicates, outliers, partitions ---------------------------------------------
def _prepare(out: Path) -> Path:
    """The folder to build in; an earlier compaction in ``out`` is replaced only when done."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"output {out} is a file; give a folder for the shards")
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST).exists():
        raise UsageError(f"output {out} is not empty and holds no compacted hub ({MANIFEST}); give a new "
                         "folder or an earlier compaction's")
    work = out / ".compacting"
    shutil.rmtree(work, ignore_errors=True)
    (work / "staging").mkdir(parents=True)
    return work


def _finish(connection: Any, work: Path, out: Path, report: Compacted) -> list[dict[str, Any]]:
    keys = key_columns()
    staged = sql_list([str(p) for p in sorted((work / "staging").glob("*.parquet"))])
    connection.execute(f"CREATE TEMP VIEW staged AS SELECT * FROM read_parquet({staged}, "
                       "union_by_name = true)")
    refused = settle(connection)
    for _, _, reason, _ in refused:
        if reason == "duplicate":
            report.duplicates += 1
        else:
            report.refused[reason] += 1
    kept_view(connection)
    quarantine(connection, keys)
    columns = ", ".join(f'k."{name}"' if name != "outlier" else
                        "COALESCE(NULLIF(k.outlier, ''), q.reason, '') AS outlier" for name in COLUMNS)
    columns += ", k.signed"  # a reader refuses an unsigned bundle line under a signed row's id
    new = work / "shards"
    connection.execute(f"""
        COPY (SELECT {columns} FROM kept k LEFT JOIN quarantined q USING ({keys}, model_key, machine_id)
              ORDER BY k.key_id, k.model_key)
        TO '{new}' (FORMAT parquet, PARTITION_BY ({', '.join(PARTITIONS)}), COMPRESSION zstd,
                    ROW_GROUP_SIZE {ROW_GROUP_ROWS}, WRITE_PARTITION_COLUMNS true)""")
    report.rows, report.implausible, report.outliers, report.conflicts = connection.execute(
        f"SELECT {COUNTS_SQL} FROM read_parquet('{new}/**/*.parquet')").fetchone()
    (report.signed,) = connection.execute("SELECT count(*) FROM kept WHERE signed").fetchone()
    report.files = len(shard_files(new))
    return [{"source": s, "line": n, "reason": r, "message": m} for s, n, r, m in refused]


def _swap(work: Path, out: Path) -> None:
    """The new shards in place of the old (the old partitions removed first)."""
    for old in out.glob("mode=*"):
        shutil.rmtree(old)
    new = work / "shards"
    if new.exists():
        for partition in new.iterdir():
            partition.rename(out / partition.name)


def compact(specs: list[str], out: Path, warn: Warn, workers: int | None = None) -> Compacted:
    """Compact ``specs`` into ``out``; the report of what was kept, refused and marked."""
    check_sources(specs)
    if not can_sign():
        raise UsageError(f"hub compact verifies every signed line, which needs cryptography: {SIGNING_HELP}")
    work = _prepare(out)
    report, refused = Compacted(), []
    try:
        tasks: list[tuple[_Document, Iterator[tuple[int, bytes]] | None]] = []
        inline: list[tuple[_Document, Iterator[tuple[int, bytes]] | None]] = []
        for document, lines in _documents(specs):
            (inline if lines is not None else tasks).append((document, lines))
        count = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
        staging = str(work / "staging")
        results: list[_Read] = [_read_lines(doc, lines, Path(staging)) for doc, lines in inline if lines]
        if count > 1:
            with multiprocessing.get_context("spawn").Pool(count) as pool:
                results += pool.map(_read_document, [(doc, staging) for doc, _ in tasks], chunksize=1)
        else:
            results += [_read_document((doc, staging)) for doc, _ in tasks]
        results.sort(key=lambda r: r.index)
        for read in results:
            report.lines += read.lines
            report.not_results += read.not_results
            refused += read.refused
            for item in read.refused:
                report.refused[item["reason"]] += 1
        if not any(read.staged for read in results):
            raise UsageError(f"the sources hold no usable shared result to compact ({report.summary()})")
        connection = duckdb_connection("hub compact")
        connection.execute(f"SET memory_limit = '{COMPACT_MEMORY}'")
        connection.execute(f"SET temp_directory = '{work / 'spill'}'")
        refused += _finish(connection, work, out, report)
        connection.close()
        _swap(work, out)
        _write_refused(out / REFUSED, refused)
        manifest = {"shard_version": SHARD_VERSION, "accelbench_version": __version__,
                    "compacted_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "sources": specs, "rows": report.rows, "lines": report.lines,
                    "duplicates": report.duplicates, "refused": dict(report.refused),
                    "not_results": report.not_results, "implausible": report.implausible,
                    "outliers": report.outliers, "conflicts": report.conflicts, "signed": report.signed}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _write_refused(path: Path, refused: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for item in refused:
            handle.write(json.dumps(item, ensure_ascii=True) + "\n")
