"""Large collections read in place: Parquet shards (``shards.py``) queried through DuckDB, only the
rows of the work asked for, reduced to what the reader shows.

* ``compare --against`` (``shard_key_peers``): for each of the user's keys and device models, what
  ``compare/peers.judge`` reads (``KeyPeers``): every device model's group over its machines'
  medians, the user's model's machine medians and its recorded settings (counted, with the
  median rate of each value), and how many results were kept apart and why. Ten million rows
  of one key become a few dozen numbers per device model and a list of machine medians.
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
from accelbench.compare.outliers import mark_outliers
from accelbench.compare.peers import KeyPeers, ModelGroup, PeerResult, setting_stats
from accelbench.results.key import KEY_FIELDS
from accelbench.sharing.shards import (
    COLUMNS,
    duckdb_connection,
    key_columns,
    key_condition,
    literal,
    relation,
    row_of,
    sql_list,
)
from accelbench.sharing.sources import Loaded, load_collection

#: Columns a reader uses (never ``line``: the largest, and only compaction reads it).
READ_COLUMNS = tuple(name for name in COLUMNS if name not in ("shard_version", "accelbench_version"))
KeyTuple = tuple[Any, ...]


def collection_relation(connection: Any, files: list[str], peers: Sequence[PeerResult],
                        modes: set[str] | None = None) -> str:
    """The shards and the bundle results ``peers`` as one relation (a result in both counts once)."""
    shards = relation(connection, files, modes) if files else None
    if not peers:
        assert shards is not None
        return shards
    import pyarrow as pa

    rows = [row_of(p, {}, "") for p in peers if not p.published]
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


def shard_key_peers(connection: Any, rel: str, wanted: set[tuple[KeyTuple, str]], machine: str,
                    exclude: set[str]) -> dict[tuple[KeyTuple, str], KeyPeers]:
    """For each (key, device model) of ``wanted`` (model_key), what ``compare/peers.judge`` reads,
    computed in DuckDB: every device model's group, the user's model's machine values and settings,
    what was kept apart. ``machine``: this install's id (its results are no peers); ``exclude``:
    the content hashes of the user's own results."""
    keys, width = key_columns(), len(KEY_FIELDS)
    own = sql_list(sorted({model for _, model in wanted}))
    connection.execute(
        f"CREATE OR REPLACE TEMP VIEW work AS SELECT * FROM {rel} "
        f"WHERE {key_condition({key for key, _ in wanted})} AND machine_id <> {literal(machine or chr(0))} "
        f"AND NOT list_contains({sql_list(sorted(exclude))}, hash)")
    groups: dict[KeyTuple, list[ModelGroup]] = {}
    for row in _model_groups(connection, "work"):
        groups.setdefault(tuple(row[:width]), []).append(ModelGroup(*row[width + 1:]))
    values = {(tuple(row[:width]), row[width]): [float(v) for v in row[width + 1]]
              for row in connection.execute(
                  f"SELECT {keys}, model_key, list(rate) FROM machines "
                  f"WHERE list_contains({own}, model_key) GROUP BY {keys}, model_key").fetchall()}
    cache: dict[str, dict[str, str]] = {}
    pairs: dict[tuple[KeyTuple, str], list[tuple[dict[str, str], list[float]]]] = {}
    for row in connection.execute(
            f"SELECT {keys}, model_key, settings, list(rate) FROM work "
            f"WHERE implausible = '' AND outlier = '' AND list_contains({own}, model_key) "
            f"GROUP BY {keys}, model_key, settings").fetchall():
        pairs.setdefault((tuple(row[:width]), row[width]), []).append((_settings(row[width + 1], cache),
                                                                       row[width + 2]))
    apart: dict[KeyTuple, dict[str, Any]] = {}
    for row in connection.execute(
            f"SELECT {keys}, implausible, outlier, count(*) FROM work "
            "WHERE implausible <> '' OR outlier <> '' GROUP BY ALL").fetchall():
        kept = apart.setdefault(tuple(row[:width]), {"invalid": 0, "invalid_reasons": [], "outliers": 0,
                                                     "outlier_reasons": []})
        kind = "invalid" if row[width] else "outliers"
        kept[kind] += row[width + 2]
        kept["invalid_reasons" if row[width] else "outlier_reasons"].append(row[width] or row[width + 1])
    for kept in apart.values():
        kept["invalid_reasons"] = sorted(set(kept["invalid_reasons"]))
        kept["outlier_reasons"] = sorted(set(kept["outlier_reasons"]))
    return {(key, model): KeyPeers(sorted(groups.get(key, []), key=lambda g: -g.median),
                                   values.get((key, model), []), setting_stats(pairs.get((key, model), [])),
                                   apart.get(key, {}))
            for key, model in wanted}


def _model_groups(connection: Any, rel: str) -> list[tuple[Any, ...]]:
    """Per key and device model: the spelling, results, machines, median, 10th and 90th
    percentile and best over the machines' medians (``compare/peers._group`` in SQL). Leaves the
    machines' medians in the temporary table ``machines`` (one pass over the rows)."""
    keys = key_columns()
    connection.execute(f"CREATE OR REPLACE TEMP TABLE machines AS {_machines(rel, 'model_key')}")
    spellings = (f"SELECT {keys}, model_key, first(device_model ORDER BY n DESC, device_model) AS spelling "
                 f"FROM (SELECT {keys}, model_key, device_model, count(*) AS n FROM {rel} "
                 "WHERE implausible = '' AND outlier = '' GROUP BY ALL) GROUP BY ALL")
    return connection.execute(
        f"SELECT {keys}, model_key, s.spelling, g.* EXCLUDE ({keys}, model_key) FROM ("
        f"  SELECT {keys}, model_key, sum(n) AS n, count(*) AS machines, quantile_cont(rate, 0.5) AS median, "
        "   quantile_cont(rate, 0.1) AS low, quantile_cont(rate, 0.9) AS high, max(rate) AS best "
        f"  FROM machines GROUP BY {keys}, model_key) g "
        f"JOIN ({spellings}) s USING ({keys}, model_key)").fetchall()


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
    spellings = dict(connection.execute(
        "SELECT model_key, first(device_model ORDER BY n DESC, device_model) FROM ("
        f"  SELECT model_key, device_model, count(*) AS n FROM {rel} WHERE implausible = '' AND outlier = '' "
        "  GROUP BY ALL) GROUP BY model_key").fetchall())
    for row in _model_groups(connection, rel):
        summary = collection.keys.setdefault(tuple(row[:width]), KeySummary())
        summary.groups.append(ModelGroup(*row[width + 1:]))
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
