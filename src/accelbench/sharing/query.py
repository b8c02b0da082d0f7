"""Large collections read in place: Parquet shards (``shards.py``) queried through DuckDB, only the
rows of the work asked for, reduced to what the reader shows.

* ``compare --against`` (``shard_peers``): for the user's keys, every row of the user's own device
  models (their settings explain a verdict) and every row kept apart; every other device model's
  rows reduced to one peer per machine (its median over its results, ``PeerResult.results`` =
  their count), which is all ``compare/peers.place`` reads of them. Ten million rows of one key
  become a few thousand peers.
* ``site`` (``shard_collection``) and ``hub aggregate`` (``shard_bands``): the summaries of
  ``compare/collection.py`` and ``compare/bands.py`` computed in SQL: machine medians, then their
  percentiles (DuckDB's quantile_cont interpolates linearly, as numpy's percentile does: tests hold
  the SQL and the Python summaries of the same results equal).

Results read from bundles (JSON lines) join the same queries as a registered table of the same
columns, so a collection can be shards plus the bundles submitted since they were compacted; a
bundle line and a shard row with one content hash count once.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from accelbench.compare.bands import PERCENTILES, Band, band_order
from accelbench.compare.collection import Collection, KeySummary, collect, with_published
from accelbench.compare.peers import ModelGroup, PeerResult, mark_outliers
from accelbench.results.key import KEY_FIELDS
from accelbench.sharing.shards import (
    COLUMNS,
    duckdb_connection,
    key_columns,
    key_condition,
    relation,
    row_of,
    sql_list,
)
from accelbench.sharing.sources import Loaded, load_collection

#: Columns a reader uses (never ``line``: the largest, and only compaction reads it).
READ_COLUMNS = tuple(name for name in COLUMNS if name not in ("line", "shard_version", "accelbench_version"))
KeyTuple = tuple[Any, ...]


def collection_relation(connection: Any, files: list[str], peers: Sequence[PeerResult],
                        modes: set[str] | None = None) -> str:
    """The shards and the bundle results ``peers`` as one relation (a result in both counts once)."""
    shards = relation(connection, files, modes) if files else None
    if not peers:
        assert shards is not None
        return shards
    import pyarrow as pa

    rows = [row_of(p, {}, "", "") for p in peers if not p.published]
    table = pa.Table.from_pylist([{name: row[name] for name in READ_COLUMNS} for row in rows])
    connection.register("bundle_results", table)
    bundles = f"(SELECT {', '.join(chr(34) + n + chr(34) for n in READ_COLUMNS)} FROM bundle_results)"
    if shards is None:
        return bundles
    columns = ", ".join(f'"{name}"' for name in READ_COLUMNS)
    return (f"(SELECT {columns} FROM {shards} WHERE hash NOT IN (SELECT hash FROM bundle_results) "
            f"UNION ALL {bundles})")


def _settings(text: str, cache: dict[str, dict[str, str]]) -> dict[str, str]:
    found = cache.get(text)
    if found is None:
        found = cache[text] = {k: str(v) for k, v in json.loads(text).items()} if text else {}
    return found


def shard_peers(connection: Any, rel: str, keys: set[KeyTuple], own_models: set[str]) -> list[PeerResult]:
    """The peers of ``keys`` (see the module's docstring); ``own_models``: model_key values."""
    condition, params = key_condition(keys)
    own = sql_list(sorted(own_models))
    cache: dict[str, dict[str, str]] = {}
    full = connection.execute(
        f"SELECT {key_columns()}, device_kind, device_model, rate, settings, machine_id, hash, dataset_size, "
        f"implausible, outlier, date FROM {rel} WHERE {condition} AND "
        f"(list_contains({own}, model_key) OR implausible <> '' OR outlier <> '')", params).fetchall()
    width = len(KEY_FIELDS)
    peers = [PeerResult(tuple(row[:width]), row[width], row[width + 1], row[width + 2],
                        _settings(row[width + 3], cache), machine_id=row[width + 4],
                        content_hash=row[width + 5],
                        dataset_size=row[width + 6] or 0, invalid=row[width + 7], outlier=row[width + 8],
                        date=row[width + 9]) for row in full]
    reduced = connection.execute(
        f"SELECT {key_columns()}, device_kind, mode(device_model), median(rate), count(*), machine_id, "
        f"mode(dataset_size), min(date) FROM {rel} WHERE {condition} AND NOT list_contains({own}, model_key) "
        f"AND implausible = '' AND outlier = '' GROUP BY {key_columns()}, device_kind, model_key, "
        "machine_id, CASE WHEN machine_id = '' THEN hash END", params).fetchall()
    peers += [PeerResult(tuple(row[:width]), row[width], row[width + 1], row[width + 2],
                         machine_id=row[width + 4], results=row[width + 3], dataset_size=row[width + 5] or 0,
                         date=row[width + 6] or "") for row in reduced]
    return peers


def _machines(rel: str, by: str) -> str:
    """One row per machine (its median rate and result count) within each group of the key and
    ``by``; a result without a machine id is a machine of its own. Rows kept apart take no part."""
    keys = key_columns()
    return (f"SELECT {keys}, {by}, machine_id, median(rate) AS rate, count(*) AS n, "
            "min(NULLIF(date, '')) AS first_date, max(NULLIF(date, '')) AS last_date "
            f"FROM {rel} WHERE implausible = '' AND outlier = '' "
            f"GROUP BY {keys}, {by}, machine_id, CASE WHEN machine_id = '' THEN hash END")


def shard_collection(connection: Any, rel: str) -> Collection:
    """``compare/collection.collect``'s summary of the relation's results, in SQL."""
    keys, width = key_columns(), len(KEY_FIELDS)
    collection = Collection()
    groups = connection.execute(
        f"SELECT {keys}, model_key, sum(n), count(*), quantile_cont(rate, 0.5), quantile_cont(rate, 0.1), "
        f"quantile_cont(rate, 0.9), max(rate) FROM ({_machines(rel, 'model_key')}) "
        f"GROUP BY {keys}, model_key").fetchall()
    spellings = dict(connection.execute(
        f"SELECT model_key, mode(device_model) FROM {rel} WHERE implausible = '' AND outlier = '' "
        "GROUP BY model_key").fetchall())
    for row in groups:
        summary = collection.keys.setdefault(tuple(row[:width]), KeySummary())
        summary.groups.append(ModelGroup(spellings[row[width]], *row[width + 1:width + 7]))
    for row in connection.execute(
            f"SELECT {keys}, implausible, outlier, count(*) FROM {rel} "
            "WHERE implausible <> '' OR outlier <> '' GROUP BY ALL").fetchall():
        summary = collection.keys.setdefault(tuple(row[:width]), KeySummary())
        summary.apart[row[width] or row[width + 1]] += row[width + 2]
    for row in connection.execute(
            f"SELECT {keys}, mode(dataset_size) FROM {rel} WHERE implausible = '' AND outlier = '' "
            "AND dataset_size > 0 GROUP BY ALL").fetchall():
        collection.keys[tuple(row[:width])].dataset_size = row[width]
    for key, summary in collection.keys.items():
        summary.groups.sort(key=lambda g: -g.median)
        with_published(key, summary)
    cache: dict[str, dict[str, str]] = {}
    counts: dict[str, Counter[tuple[str, str]]] = {}
    for model, settings, n in connection.execute(
            f"SELECT model_key, settings, count(*) FROM {rel} WHERE implausible = '' AND outlier = '' "
            "GROUP BY ALL").fetchall():
        counter = counts.setdefault(model, Counter())
        for label, value in _settings(settings, cache).items():
            counter[(label, value)] += n
    collection.settings = {model: (spellings[model], counter) for model, counter in counts.items()}
    collection.results, collection.machines = connection.execute(
        f"SELECT count(*), count(DISTINCT NULLIF(machine_id, '')) FROM {rel} "
        "WHERE implausible = '' AND outlier = ''").fetchone()
    return collection


def shard_bands(connection: Any, rel: str, min_machines: int) -> list[Band]:
    """``compare/bands.bands_of``'s bands of the relation's results, in SQL."""
    keys, width = key_columns(), len(KEY_FIELDS)
    fractions = "[" + ", ".join(str(p / 100) for p in PERCENTILES) + "]"
    rows = connection.execute(
        f"SELECT {keys}, device_class, count(*), sum(n), quantile_cont(rate, {fractions}), min(first_date), "
        f"max(last_date) FROM ({_machines(rel, 'device_class')}) GROUP BY {keys}, device_class "
        f"HAVING count(*) >= {int(min_machines)}").fetchall()
    bands = [Band(tuple(row[:width]), row[width], row[width + 1], row[width + 2],
                  tuple(float(v) for v in row[width + 3]), row[width + 4] or "", row[width + 5] or "")
             for row in rows]
    return sorted(bands, key=band_order)


def read_collection(specs: list[str], warn: Any) -> tuple[Collection, Loaded]:
    """The summary a site shows of ``specs``: bundles alone are summarised here
    (``compare/collection.collect``); with Parquet shards, in DuckDB over both."""
    loaded, files = load_collection(specs, warn)
    peers = mark_outliers(loaded.peers)
    if not files:
        return collect(peers), loaded
    connection = duckdb_connection(" ".join(specs))
    try:
        collection = shard_collection(connection, collection_relation(connection, files, peers))
    finally:
        connection.close()
    loaded.shard_rows = collection.results + collection.apart - len(peers)
    return collection, loaded
