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
  A site's figures across cases (MLPerf Client's overall, ``shards.OVERALL_COLUMNS``) are read as
  the lines carried them and counted by ``collection.overall_groups``, as on the bundle path.

Results read from bundles (JSON lines) join the same queries as a registered table of the same
columns, so a collection can be shards plus the bundles submitted since they were compacted; a
bundle line and a shard row with one content hash count once.

A generation row's decode columns (``shards.DECODE_COLUMNS``) take part as on the bundle path: a
placement sets aside the rows ``decode_diagnosis.host_mismatch`` rules out (each distinct bound and
host CPU of the key judged once, in Python, by that rule), and a site's groups and the bands are
split by the stored bound class and named with ``decode_diagnosis.pooled_words``. What was read and kept apart
is counted one way for every surface (``count_read``: ``shards.COUNTS_SQL``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from accelbench.compare.bands import PERCENTILES, Band, band_order
from accelbench.compare.collection import (
    Collection,
    KeySummary,
    OverallEntry,
    collect,
    overall_groups,
    with_published,
)
from accelbench.compare.decode_diagnosis import DecodeDiagnosis, host_mismatch, pooled_words
from accelbench.compare.outliers import CONFLICT
from accelbench.compare.peers import KeyPeers, ModelGroup, PeerOverall, PeerResult, setting_stats
from accelbench.results.key import KEY_FIELDS
from accelbench.results.protocol_summary import overall_key
from accelbench.sharing.loaded import Loaded
from accelbench.sharing.shards import (
    COLUMNS,
    COUNTS_SQL,
    HOST_RULE_SQL,
    NO_MACHINE,
    arrow_schema,
    duckdb_connection,
    host_rule_value,
    key_columns,
    key_condition,
    literal,
    relation,
    row_of,
    sql_list,
    theirs,
)
from accelbench.sharing.signing import FORGED_ID
from accelbench.sharing.sources import load_collection

#: Columns a reader uses (never ``line``: the largest, and only compaction reads it).
READ_COLUMNS = tuple(name for name in COLUMNS if name not in ("shard_version", "accelbench_version"))
KeyTuple = tuple[Any, ...]
#: One of the user's cases as a placement from shards needs it: key, device model (model_key) and
#: decode diagnosis (the host rule depends on it).
Wanted = tuple[KeyTuple, str, DecodeDiagnosis | None]


def collection_relation(connection: Any, files: list[str], peers: Sequence[PeerResult],
                        modes: set[str] | None = None, *, loaded: Loaded | None = None,
                        warn: Callable[[str], None] | None = None) -> str:
    """The shards and the bundle results ``peers`` as one relation (a result in both counts once).

    Where ``loaded`` (what read ``peers``: their cases and signatures) is given, a shard row and a
    bundle line are judged as two bundle lines are (``conflicts.py``): an unsigned one under a
    machine id that a signed one of the other holds is refused as forged (a shard records whether
    its line was signed since shard version 3), counted in ``loaded.skipped``; the rows of one
    machine and case whose measurements differ (key, device model, rate) are a conflict, both
    quarantined (``CONFLICT``: ``count_read`` counts them in ``Loaded.conflicts``). Each is
    reported through ``warn``."""
    shards = relation(connection, files, modes) if files else None
    if not peers:
        assert shards is not None
        return shards
    import pyarrow as pa

    cases, signed = (loaded.cases, loaded.signed) if loaded is not None else ({}, set())
    rows = [row_of(p, {}, cases.get(p.content_hash, "")) for p in peers if not p.published]
    schema = arrow_schema(list(READ_COLUMNS)).append(pa.field("signed", pa.bool_()))
    table = pa.Table.from_pylist([{**{name: row[name] for name in READ_COLUMNS},
                                   "signed": row["hash"] in signed} for row in rows], schema=schema)
    connection.register("bundle_results", table)
    columns = ", ".join(f'"{name}"' for name in READ_COLUMNS)
    bundles = f"(SELECT {columns} FROM bundle_results)"
    if shards is None:
        return bundles
    fresh = f"{shards} WHERE hash NOT IN (SELECT hash FROM bundle_results)"
    forged = _forged(connection, fresh, warn) if loaded is not None else set()
    if forged and loaded is not None:
        refused = [p for p in loaded.peers if p.content_hash in forged]
        loaded.peers = [p for p in loaded.peers if p.content_hash not in forged]
        loaded.unsigned -= sum(p.results for p in refused)
        loaded.skipped[FORGED_ID] += len(forged)
        kept = f"NOT list_contains({sql_list(sorted(forged))}, hash)"
        fresh += f" AND {kept}"
        bundles = f"(SELECT {columns} FROM bundle_results WHERE {kept})"
    conflicting = _shard_bundle_conflicts(connection, fresh, bundles, warn) if loaded is not None else set()
    if conflicting:
        marked = (f"CASE WHEN list_contains({sql_list(sorted(conflicting))}, hash) THEN {literal(CONFLICT)} "
                  "ELSE outlier END AS outlier")
        bundles = f"(SELECT * REPLACE ({marked}) FROM {bundles})"
        fresh = f"(SELECT * REPLACE ({marked}) FROM {fresh})"
    return f"(SELECT {columns} FROM {fresh} UNION ALL {bundles})"


def _forged(connection: Any, shards: str, warn: Callable[[str], None] | None) -> set[str]:
    """The hashes of the unsigned bundle results under a machine id a signed shard row holds, and
    of the unsigned shard rows under one a signed bundle result holds (none from shards older than
    version 3: they do not say whether a row was signed)."""
    if "signed" not in {row[0] for row in connection.execute(f"DESCRIBE SELECT * FROM {shards}").fetchall()}:
        return set()
    found = connection.execute(
        f"WITH s AS (SELECT hash, machine_id, signed FROM {shards}) "
        "SELECT hash, 'bundle', machine_id FROM bundle_results WHERE NOT signed "
        "AND machine_id IN (SELECT machine_id FROM s WHERE signed) "
        "UNION ALL SELECT hash, 'Parquet shard', machine_id FROM s WHERE signed IS NOT DISTINCT FROM false "
        "AND machine_id IN (SELECT machine_id FROM bundle_results WHERE signed) ORDER BY ALL").fetchall()
    for digest, where, machine in found:
        if warn is not None:
            warn(f"a {where}'s result {digest[:16]} refused: unsigned, under the id of machine {machine}, "
                 "which signs its lines (forged)")
    return {digest for digest, _, _ in found}


def _shard_bundle_conflicts(connection: Any, shards: str, bundles: str,
                            warn: Callable[[str], None] | None) -> set[str]:
    """The hashes of the shard rows and bundle results of one machine and case whose measurements
    differ (the shard rows that are not bundle results too: ``shards``), each pair reported."""
    pairs = connection.execute(
        f"SELECT s.hash, b.hash, s.machine_id, s.rate, b.rate FROM (SELECT * FROM {shards}) s "
        f"JOIN {bundles} b ON s.machine_id = b.machine_id AND s.case_id = b.case_id "
        "WHERE b.case_id <> '' AND (s.key_id <> b.key_id OR s.device_model <> b.device_model "
        "OR s.rate IS DISTINCT FROM b.rate) ORDER BY ALL").fetchall()
    for _, _, machine, shard_rate, bundle_rate in pairs:
        if warn is not None:
            warn(f"conflict: machine {machine} shares one case in a Parquet shard ({shard_rate:.4g}) and in "
                 f"a bundle ({bundle_rate:.4g}) with different figures; both kept out of every band")
    return {digest for shard, bundle, *_ in pairs for digest in (shard, bundle)}


def _settings(text: str, cache: dict[str, dict[str, str]]) -> dict[str, str]:
    found = cache.get(text)
    if found is None:
        found = cache[text] = {k: str(v) for k, v in json.loads(text).items()} if text else {}
    return found


def count_read(connection: Any, rel: str, loaded: Loaded, keys: set[KeyTuple] | None = None) -> None:
    """Count into ``loaded`` what ``rel`` (shards and ``loaded``'s bundle results; only ``keys``
    where given) holds: the shards' part of its results, implausible, quarantined and in conflict,
    so that the summary, ``--json``, site and hub aggregate count what the placements count."""
    where = f" WHERE {key_condition(keys)}" if keys else ""
    loaded.count_shards(*connection.execute(f"SELECT {COUNTS_SQL} FROM {rel}{where}").fetchone())


def shard_key_peers(connection: Any, rel: str, wanted: set[Wanted], machine: str,
                    cases: set[str]) -> dict[Wanted, KeyPeers]:
    """For each (key, device model, decode diagnosis) of ``wanted``, what ``compare/peers.judge``
    reads, computed in DuckDB: every device model's group, the user's model's machine values and
    settings, what was kept apart and what was set aside (the host rule). Left out: every result of
    ``machine`` (this install's id), and the user's own results shared before under another id
    (``cases``: their case ids; the bundle path knows them by content hash). One key at a time:
    grouping by machine alone is what makes ten million rows of one key fast."""
    found: dict[Wanted, KeyPeers] = {}
    for key in sorted({key for key, _, _ in wanted}, key=lambda k: tuple(str(v) for v in k)):
        connection.execute(
            "CREATE OR REPLACE TEMP VIEW same_work AS SELECT model_key, device_model, machine_id, rate, "
            f"implausible, outlier, settings, decode_bound, host_cpu FROM {rel} WHERE {key_condition({key})} "
            f"AND machine_id <> {literal(machine or chr(0))} "
            f"AND NOT list_contains({sql_list(sorted(cases))}, case_id)")
        diagnoses = {decode for other, _, decode in wanted if other == key}
        # Every (bound, host CPU) of the key's rows; none needed where no case of it was judged.
        hosts = (connection.execute("SELECT decode_bound, host_cpu, count(*) FROM same_work WHERE "
                                    "decode_bound IS NOT NULL GROUP BY ALL ORDER BY ALL").fetchall()
                 if any(decode is not None for decode in diagnoses) else [])
        for decode in diagnoses:
            aside, compared = _host_rule(decode, hosts)
            connection.execute(f"CREATE OR REPLACE TEMP VIEW work AS SELECT * FROM same_work "
                               f"WHERE {compared}")
            groups = [ModelGroup(*row[1:]) for row in _model_groups(connection, "work", keyed=False)]
            models = {model for other, model, mine in wanted if other == key and mine == decode}
            found.update({(key, model, decode): KeyPeers(sorted(groups, key=lambda g: -g.median), values,
                                                         stats, {**apart, **aside})
                          for model, (values, stats, apart) in _own_models(connection, models).items()})
    return found


def _host_rule(mine: DecodeDiagnosis | None, hosts: list[tuple[str, str, int]]) -> tuple[dict[str, Any], str]:
    """``compare/peers.set_aside`` over rows of one key as (bound, host CPU, rows): what is set aside
    (counted by reason) and the SQL condition of the rows compared. Each distinct bound and host is
    judged by ``decode_diagnosis.host_mismatch``, the rule of every other path."""
    reasons: Counter[str] = Counter()
    ruled_out = []
    for bound, host, rows in hosts:
        reason = host_mismatch(mine, theirs(bound, host))
        if reason:
            reasons[reason] += rows
            ruled_out.append(host_rule_value(bound, host))
    if not ruled_out:
        return {}, "TRUE"
    return ({"set_aside": sum(reasons.values()), "set_aside_reasons": sorted(reasons)},
            f"(decode_bound IS NULL OR NOT list_contains({sql_list(ruled_out)}, {HOST_RULE_SQL}))")


def _own_models(connection: Any, models: set[str]) -> dict[str, tuple[Any, ...]]:
    """Of the key in ``work``: each of ``models``' machine values and settings stats, and what was
    kept apart (the same for every model of the key)."""
    own = sql_list(sorted(models))
    values = {model: [float(v) for v in rates] for model, rates in connection.execute(
        f"SELECT model_key, list(rate) FROM machines WHERE list_contains({own}, model_key) "
        "GROUP BY model_key").fetchall()}
    cache: dict[str, dict[str, str]] = {}
    pairs: dict[str, list[tuple[dict[str, str], list[float]]]] = {}
    for model, settings, rates in connection.execute(
            "SELECT model_key, settings, list(rate) FROM work WHERE implausible = '' AND outlier = '' "
            f"AND list_contains({own}, model_key) GROUP BY model_key, settings").fetchall():
        pairs.setdefault(model, []).append((_settings(settings, cache), rates))
    apart: dict[str, Any] = {"invalid": 0, "invalid_reasons": [], "outliers": 0, "outlier_reasons": []}
    for implausible, outlier, count in connection.execute(
            "SELECT implausible, outlier, count(*) FROM work WHERE implausible <> '' OR outlier <> '' "
            "GROUP BY ALL ORDER BY ALL").fetchall():
        apart["invalid" if implausible else "outliers"] += count
        apart["invalid_reasons" if implausible else "outlier_reasons"].append(implausible or outlier)
    return {model: (values.get(model, []), setting_stats(pairs.get(model, [])), apart) for model in models}


def _model_groups(connection: Any, rel: str, keyed: bool = True,
                  by: str = "model_key") -> list[tuple[Any, ...]]:
    """Per key (where ``keyed``: ``rel`` holds several) and device model (``by``: the model_key, and
    the columns after it): the spelling, results, machines, median, 10th and 90th percentile and
    over the machines' medians, and the best single result (``compare/peers._group`` in SQL). Leaves
    the machines' medians in the temporary table ``machines`` (one pass over the rows)."""
    keys = key_columns() + ", " if keyed else ""
    connection.execute(f"CREATE OR REPLACE TEMP TABLE machines AS {_machines(rel, by, keyed)}")
    spellings = (f"SELECT {keys}{by}, first(device_model ORDER BY n DESC, device_model) AS spelling "
                 f"FROM (SELECT {keys}{by}, device_model, count(*) AS n FROM {rel} "
                 "WHERE implausible = '' AND outlier = '' GROUP BY ALL) GROUP BY ALL")
    return connection.execute(
        f"SELECT {keys}{by}, s.spelling, g.* EXCLUDE ({keys}{by}) FROM ("
        f"  SELECT {keys}{by}, sum(n) AS n, count(*) AS machines, quantile_cont(rate, 0.5) AS median, "
        "   quantile_cont(rate, 0.1) AS low, quantile_cont(rate, 0.9) AS high, max(top) AS best "
        f"  FROM machines GROUP BY {keys}{by}) g "
        f"JOIN ({spellings}) s USING ({keys}{by})").fetchall()


def _machines(rel: str, by: str, keyed: bool = True) -> str:
    """One row per machine (its median rate, fastest result and result count) within each group of
    the key and ``by``; rows kept apart take no part. Shards never hold a blank machine id (``hub compact``
    names a result without one by its hash, a machine of its own)."""
    keys = key_columns() + ", " if keyed else ""
    dates = ", min(NULLIF(date, '')) AS first_date, max(NULLIF(date, '')) AS last_date" if keyed else ""
    return (f"SELECT {keys}{by}, machine_id, median(rate) AS rate, max(rate) AS top, "
            f"count(*) AS n{dates} "
            f"FROM {rel} WHERE implausible = '' AND outlier = '' GROUP BY {keys}{by}, machine_id")


def overall_entries(connection: Any, rel: str) -> list[OverallEntry]:
    """The figures across cases the rows carry, as ``overall_groups`` reads them (what
    ``collection.overall_entry`` reads of a bundle's peer): a row per line of each group (the
    lengths differ), counted once by ``overall_groups``; rows kept apart carry none."""
    keys, width = key_columns(), len(KEY_FIELDS)
    return [(overall_key(tuple(row[:width])), row[width], row[width + 1], row[width + 2], row[width + 3],
             PeerOverall(row[width + 3], row[width + 4], int(row[width + 5]), float(row[width + 6]),
                         float(row[width + 7])))
            for row in connection.execute(
                f"SELECT DISTINCT {keys}, model_key, device_model, machine_id, overall_group, "
                f"overall_protocol, overall_categories, overall_ttft_s, overall_token_rate FROM {rel} "
                "WHERE implausible = '' AND outlier = '' AND overall_group <> '' AND overall_ttft_s > 0 "
                "AND overall_token_rate > 0 ORDER BY ALL").fetchall()]


def shard_collection(connection: Any, rel: str) -> Collection:
    """``compare/collection.collect``'s summary of the relation's results, in SQL: a generation
    key's groups split by the decode's bound class (``decode_class``) and named with its words."""
    keys, width = key_columns(), len(KEY_FIELDS)
    collection = Collection()
    spellings = dict(connection.execute(
        "SELECT model_key, first(device_model ORDER BY n DESC, device_model) FROM ("
        f"  SELECT model_key, device_model, count(*) AS n FROM {rel} WHERE implausible = '' AND outlier = '' "
        "  GROUP BY ALL) GROUP BY model_key").fetchall())
    words = _decode_words(connection, rel)
    for row in _model_groups(connection, rel, by="model_key, decode_class"):
        summary = collection.keys.setdefault(tuple(row[:width]), KeySummary())
        recipe, bound = words.get(tuple(row[:width + 2]), ("", ""))
        # The group's first fields are the row's last columns; its recipe and decode, the words.
        summary.groups.append(replace(ModelGroup(*row[width + 2:]), recipe=recipe, decode=bound))
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
    collection.overall = overall_groups(overall_entries(connection, rel))
    collection.results, collection.machines = connection.execute(
        f"SELECT count(*), count(DISTINCT machine_id) FILTER (NOT starts_with(machine_id, '{NO_MACHINE}')) "
        f"FROM {rel} WHERE implausible = '' AND outlier = ''").fetchone()
    return collection


def _decode_words(connection: Any, rel: str,
                  by: str = "model_key, decode_class") -> dict[tuple[Any, ...], tuple[str, str]]:
    """(key..., the two columns of ``by``) -> the (recipe, bound) words of its judged rows
    (``decode_diagnosis.pooled_words``, as ``collection._groups`` names a group and
    ``bands.bands_of`` a band)."""
    keys, width = key_columns(), len(KEY_FIELDS)
    judged = f"FROM {rel} WHERE implausible = '' AND outlier = '' AND decode_bound IS NOT NULL"
    recipes: dict[tuple[Any, ...], Counter[str]] = {}
    for row in connection.execute(f"SELECT {keys}, {by}, decode_recipe, count(*) {judged} "
                                  "GROUP BY ALL").fetchall():
        recipes.setdefault(tuple(row[:width + 2]), Counter())[row[width + 2]] += row[width + 3]
    words = {}
    for row in connection.execute(
            f"SELECT {keys}, {by}, count(*), "
            "list(DISTINCT decode_bound) FILTER (decode_bound <> ''), "
            "median(decode_floor_ratio) FILTER (decode_bound <> '' AND decode_floor_ratio <> 0), "
            f"min(host_cpu) FILTER (decode_bound <> '') {judged} GROUP BY ALL").fetchall():
        group = tuple(row[:width + 2])
        rows, bounds, ratio, host = row[width + 2:]
        words[group] = pooled_words(recipes[group], rows, set(bounds or ()), ratio, host or "")
    return words


def shard_bands(connection: Any, rel: str, min_machines: int) -> list[Band]:
    """``compare/bands.bands_of``'s bands of the relation's results, in SQL."""
    keys, width = key_columns(), len(KEY_FIELDS)
    fractions = "[" + ", ".join(str(p / 100) for p in PERCENTILES) + "]"
    by = "device_class, decode_class"
    rows = connection.execute(
        f"SELECT {keys}, {by}, count(*), sum(n), quantile_cont(rate, {fractions}), min(first_date), "
        f"max(last_date) FROM ({_machines(rel, by)}) GROUP BY {keys}, {by} "
        f"HAVING count(*) >= {int(min_machines)}").fetchall()
    words = _decode_words(connection, rel, by)
    bands = [Band(tuple(row[:width]), row[width], row[width + 2], row[width + 3],
                  tuple(float(v) for v in row[width + 4]), row[width + 5] or "", row[width + 6] or "", "",
                  row[width + 1], *words.get(tuple(row[:width + 2]), ("", "")))
             for row in rows]
    return sorted(bands, key=band_order)


def read_collection(specs: list[str], warn: Any) -> tuple[Collection, Loaded]:
    """The summary a site shows of ``specs``: bundles alone are summarised here
    (``compare/collection.collect``); with Parquet shards, in DuckDB over both."""
    loaded, files = load_collection(specs, warn)
    peers = loaded.peers  # quarantined as read (sources.load_peers)
    if not files:
        return collect(peers), loaded
    connection = duckdb_connection(" ".join(specs))
    try:
        rel = collection_relation(connection, files, peers, loaded=loaded, warn=warn)
        collection = shard_collection(connection, rel)
        count_read(connection, rel, loaded)
    finally:
        connection.close()
    return collection, loaded
