"""Parquet shards: a compacted hub's results, one row per result, partitioned so that a reader
opens only the files of its work.

Layout (hive style, which DuckDB, pyarrow and the Hugging Face dataset viewer read)::

    DIR/mode=<train|eval|generate>/device_class=<cpu|cuda|mps|xpu|other>/part-*.parquet
    DIR/refused.jsonl       every line ``hub compact`` refused, with its source, line and reason
    DIR/compacted.json      what was compacted, when, by which version (SHARD_VERSION)

Columns: ``shard_version``; ``hash`` (the line's content hash, recomputed when compacted),
``machine_id`` (``NO_MACHINE`` and the hash for a line without one), ``case_id`` (the identity two
shares of one case have in common), ``date``,
``accelbench_version``; every field of the comparability key by its name (``fields(CaseKey)``,
results/case_key.py, through ``results/key.py`` KEY_FIELDS, typed from KEY_DEFAULTS: a field added
to the key is a column here with no edit, and an older shard without it reads as the default)
and ``key_id`` (the key as one short column);
``device_kind``, ``device_class``, ``device_model``, ``model_key`` (the grouping form of the model),
``rate`` (the headline rate of the key's mode, ``results/catalogue.headline``), ``dataset_size``;
``implausible`` and ``outlier`` (why the row is kept apart, "" when it is not); ``settings`` (the
recorded settings as JSON, label -> value); a generation line's decode diagnosis as far as the
host rule and the surfaces read it (``compare/decode_diagnosis.py``, ``DECODE_COLUMNS``):
``decode_bound`` ("overhead", "bandwidth", "" where the line has a diagnosis without a bound; NULL
where it has none: not judged), ``host_cpu``, ``decode_class`` (``bound_class``: what the site and
the bands pool by), ``decode_recipe`` (``recipe_words``) and ``decode_floor_ratio``; the figures
across cases a line carries (``OVERALL_COLUMNS``: ``overall_group``, ``overall_protocol``,
``overall_categories``, ``overall_ttft_s``, ``overall_token_rate``: MLPerf Client's overall
geometric means as its run stored them, on each line of the group; a site counts a group once).
Rows are sorted by key id and device model, so a reader skips the row groups of other work.

Versions (``SHARD_VERSION``): 1, the first; 2 added the decode columns (issue 33); 3 added
``signed`` (whether the line was signed, its signature verified when compacted: a reader refuses an
unsigned bundle line under the id of a signed row, ``query.collection_relation``; not in
``COLUMNS``, as a bundle result read has none); 4 added the overall columns (a row of an older
shard reads as carrying none: its site shows no overall table until the hub is compacted again
from its bundles, whose lines hold the section). A shard of version 1 reads as if every row were
not judged (``relation`` gives the columns' defaults); one older than version 3 does not say
which rows were signed.

JSON lines stay the interchange format and the record: shards are derived from the hub's bundles
(``hub compact`` reads them again to refresh the shards), and every row's hash names the bundle
line it came from. The lines themselves are not copied into the shards: sorting them with the rows
would cost more than the whole compaction, and a reader never reads them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from accelbench.compare.decode_diagnosis import DecodeDiagnosis, bound_class
from accelbench.compare.outliers import CONFLICT
from accelbench.compare.peers import DEVICE_CLASSES, PeerOverall, PeerResult
from accelbench.errors import UsageError
from accelbench.results.key import KEY_DEFAULTS, KEY_FIELDS

SHARD_VERSION = 4
PARTITIONS = ("mode", "device_class")
REFUSED = "refused.jsonl"
MANIFEST = "compacted.json"
HUB_HELP = "pip install 'accelbench[hub]' (duckdb and pyarrow)"

#: Key field -> SQL type, derived from its default's type.
_SQL_TYPES = {bool: "BOOLEAN", int: "BIGINT", str: "VARCHAR"}
KEY_TYPES: dict[str, str] = {name: _SQL_TYPES[type(default)] for name, default in KEY_DEFAULTS.items()}
#: Every column but the key's, in order, with its SQL type.
COLUMNS: dict[str, str] = {
    "shard_version": "INTEGER", "hash": "VARCHAR", "machine_id": "VARCHAR", "case_id": "VARCHAR",
    "date": "VARCHAR", "accelbench_version": "VARCHAR",
    **KEY_TYPES, "key_id": "VARCHAR",
    "device_kind": "VARCHAR", "device_class": "VARCHAR", "device_model": "VARCHAR", "model_key": "VARCHAR",
    "rate": "DOUBLE", "dataset_size": "BIGINT", "implausible": "VARCHAR", "outlier": "VARCHAR",
    "settings": "VARCHAR",
}
#: The columns version 2 added (name -> SQL type, the value of a row that is not judged: what a
#: version-1 shard's rows read as).
DECODE_COLUMNS: dict[str, tuple[str, Any]] = {
    "decode_bound": ("VARCHAR", None), "host_cpu": ("VARCHAR", ""), "decode_class": ("VARCHAR", ""),
    "decode_recipe": ("VARCHAR", ""), "decode_floor_ratio": ("DOUBLE", None),
}
COLUMNS.update({name: kind for name, (kind, _) in DECODE_COLUMNS.items()})
#: The columns version 4 added: the figures across cases the line carries (its ``overall`` section,
#: sharing/peer_view.overall_of: MLPerf Client's overall geometric means stored with its run), as
#: ``compare/collection.overall_groups`` reads them; a row without them (every row of an older
#: shard) has the group "" and no figures.
OVERALL_COLUMNS: dict[str, tuple[str, Any]] = {
    "overall_group": ("VARCHAR", ""), "overall_protocol": ("VARCHAR", ""),
    "overall_categories": ("BIGINT", 0), "overall_ttft_s": ("DOUBLE", None),
    "overall_token_rate": ("DOUBLE", None),
}
COLUMNS.update({name: kind for name, (kind, _) in OVERALL_COLUMNS.items()})
assert set(DEVICE_CLASSES) >= {"cpu", "other"}


#: A result without a machine id (a hand-made line) is a machine of its own, named by its hash after
#: this mark (no machine id, which is hex, starts with it), so that a query groups by machine alone.
NO_MACHINE = "~"


def key_id(key: tuple[Any, ...]) -> str:
    """The key as one short column (what a reader filters on, and the shards are sorted by): a
    digest of its fields that differ from their defaults, so that a field added to the key later
    leaves the key id of every older row as it was."""
    fields = {name: value for name, value in zip(KEY_FIELDS, key, strict=True) if value != KEY_DEFAULTS[name]}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def row_of(peer: PeerResult, line: dict[str, Any], case: str) -> dict[str, Any]:
    """The shard row of a bundle line read as ``peer`` (all its settings)."""
    machine = peer.machine_id or NO_MACHINE + peer.content_hash[:15]
    return {"shard_version": SHARD_VERSION, "hash": peer.content_hash, "machine_id": machine,
            "case_id": case, "date": peer.date, "accelbench_version": str(line.get("accelbench_version", "")),
            **dict(zip(KEY_FIELDS, peer.key, strict=True)), "key_id": key_id(peer.key),
            "device_kind": peer.device_kind, "device_class": peer.device_class,
            "device_model": peer.device_model, "model_key": peer.model_key, "rate": peer.throughput,
            "dataset_size": peer.dataset_size, "implausible": peer.invalid, "outlier": peer.outlier,
            "settings": json.dumps(dict(peer.settings), sort_keys=True, separators=(",", ":")),
            **decode_columns(peer.decode), **overall_columns(peer.overall)}


def decode_columns(decode: DecodeDiagnosis | None) -> dict[str, Any]:
    """The decode columns of a row (their defaults where the line holds no diagnosis)."""
    if decode is None:
        return {name: default for name, (_, default) in DECODE_COLUMNS.items()}
    return {"decode_bound": decode.bound, "host_cpu": decode.host_cpu, "decode_class": bound_class(decode),
            "decode_recipe": decode.recipe_words(), "decode_floor_ratio": decode.floor_ratio}


def overall_columns(overall: PeerOverall | None) -> dict[str, Any]:
    """The overall columns of a row (their defaults where the line carries no figures across cases)."""
    if overall is None:
        return {name: default for name, (_, default) in OVERALL_COLUMNS.items()}
    return {"overall_group": overall.group_id, "overall_protocol": overall.protocol,
            "overall_categories": overall.categories, "overall_ttft_s": overall.ttft_s,
            "overall_token_rate": overall.token_rate}


def theirs(bound: str | None, host_cpu: str) -> DecodeDiagnosis | None:
    """A row's diagnosis as the host rule reads it (``decode_diagnosis.host_mismatch``: the bound
    and the host CPU); None where the row is not judged."""
    return None if bound is None else DecodeDiagnosis(bound=bound, host_cpu=host_cpu)


#: A row's (bound, host CPU) as one value (NULL where not judged): what the host rule sets aside.
#: (No shared string holds a control character: bundle.py refuses them.)
HOST_RULE_SQL = "decode_bound || chr(1) || host_cpu"


def host_rule_value(bound: str, host_cpu: str) -> str:
    return f"{bound}\x01{host_cpu}"


def arrow_schema(names: list[str]) -> Any:
    """The pyarrow schema of ``names`` (columns of COLUMNS, typed from their SQL types), so that a
    batch whose values are all None still has its column's type."""
    import pyarrow as pa

    types = {"INTEGER": pa.int32(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(), "VARCHAR": pa.string(),
             "BOOLEAN": pa.bool_()}
    return pa.schema([(name, types[COLUMNS[name]]) for name in names])


def shard_files(folder: Path) -> list[Path]:
    """The shards under ``folder`` (not in hidden folders: a compaction in progress)."""
    return sorted(p for p in folder.rglob("*.parquet")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def holds_shards(spec: str) -> bool:
    """A local folder (or file) holding Parquet shards."""
    if spec.startswith(("http://", "https://", "hf://")):
        return False
    path = Path(spec)
    if path.is_file():
        return path.suffix == ".parquet"
    return path.is_dir() and bool(shard_files(path))


def remote_hf_shards(org: str, name: str, revision: str | None, folder: str | None) -> list[str] | None:
    """The dataset's shards as ``hf://`` addresses DuckDB reads in place (only the row groups a
    query needs travel), where that is available: DuckDB and its httpfs extension installed, and
    not offline (HF_HUB_OFFLINE). None otherwise: the caller downloads them."""
    import os

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return None
    try:
        import duckdb
        from huggingface_hub import HfApi

        duckdb.connect().execute("LOAD httpfs")
        files = HfApi().list_repo_files(f"{org}/{name}", repo_type="dataset", revision=revision)
    except Exception:  # no DuckDB, no httpfs, no network, no listing: download instead
        return None
    prefix = (folder or "").strip("/")
    at = f"@{revision}" if revision else ""
    return [f"hf://datasets/{org}/{name}{at}/{path}" for path in sorted(files)
            if path.endswith(".parquet") and path.startswith(prefix)
            and not any(part.startswith(".") for part in path.split("/"))]


def duckdb_connection(what: str) -> Any:
    """A DuckDB connection, or the one line that says how to get DuckDB."""
    try:
        import duckdb
    except ImportError:
        raise UsageError(f"{what} holds Parquet shards, which are read through DuckDB: {HUB_HELP}; "
                         "or give the bundles (*.jsonl) instead") from None
    connection = duckdb.connect()
    # A reader's memory stays small whatever the collection's size (DuckDB spills beyond it).
    connection.execute("SET memory_limit = '600MB'")
    connection.execute("SET preserve_insertion_order = false")
    return connection


def sql_list(values: list[str]) -> str:
    """A list of string literals for SQL (quotes doubled)."""
    return "[" + ", ".join("'" + value.replace("'", "''") + "'" for value in values) + "]"


def relation(connection: Any, files: list[str], modes: set[str] | None = None) -> str:
    """The shards as one SQL relation: every column, a key field an older shard lacks as its
    default; only the partitions of ``modes`` when given (the other files are never opened)."""
    if modes:
        # The partitions of other modes are never opened, not even for their schema.
        files = [f for f in files if not any(part.startswith("mode=") and part[5:] not in modes
                                             for part in f.replace("\\", "/").split("/"))]
    if not files:
        typed = ", ".join(f'CAST(NULL AS {kind}) AS "{name}"' for name, kind in COLUMNS.items())
        return f"(SELECT {typed} WHERE FALSE)"
    if any(f.startswith("hf://") for f in files):
        connection.execute("LOAD httpfs")
        # The user's usual Hugging Face login, for a private dataset.
        connection.execute("CREATE SECRET IF NOT EXISTS hf (TYPE huggingface, PROVIDER credential_chain)")
    scan = f"read_parquet({sql_list(files)}, hive_partitioning = true, union_by_name = true)"
    present = {row[0] for row in connection.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
    missing = [name for name in ("key_id", "model_key", "rate") if name not in present]
    if missing:
        raise UsageError(f"the Parquet files {files[0]}... are not accelbench shards of this version "
                         f"(no {', '.join(missing)}): compact the hub's bundles again with accelbench hub "
                         "compact")
    defaults = {**{name: (KEY_TYPES[name], KEY_DEFAULTS[name]) for name in KEY_FIELDS}, **DECODE_COLUMNS,
                **OVERALL_COLUMNS}
    keyed = [f'COALESCE("{name}", {literal(default)}) AS "{name}"' if name in present
             else f'CAST({literal(default)} AS {kind}) AS "{name}"'
             for name, (kind, default) in defaults.items()]
    excluded = [f'"{name}"' for name in defaults if name in present]
    star = f"* EXCLUDE ({', '.join(excluded)})" if excluded else "*"
    where = f" WHERE mode IN ({sql_list(sorted(modes))[1:-1]})" if modes else ""
    return f"(SELECT {star}, {', '.join(keyed)} FROM {scan}{where})"


def literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


#: What rows hold, counted one way for every surface (compare --against's ``read``, site, hub
#: aggregate, hub compact): results, implausible, quarantined (an implausible row counts as
#: implausible only), of those in conflict (``compare/outliers.CONFLICT``).
COUNTS_SQL = ("count(*), count(*) FILTER (implausible <> ''), "
              "count(*) FILTER (implausible = '' AND outlier <> ''), "
              f"count(*) FILTER (implausible = '' AND outlier = {literal(CONFLICT)})")


def key_condition(keys: set[tuple[Any, ...]]) -> str:
    """A WHERE clause matching any of ``keys`` (one column; the row groups of other work skipped)."""
    return f"list_contains({sql_list(sorted(key_id(key) for key in keys))}, key_id)"


def key_columns() -> str:
    return ", ".join(f'"{name}"' for name in KEY_FIELDS)
