"""The user's runs against shared results: ``compare --against`` and ``run --against``.

The user's cases become peers through the very line ``share`` would write (so a result the user
already shared is recognised by its content hash and not counted as its own peer: a line of an
MLPerf Client run carries its group's ``overall`` section, as shared), carrying this install's
machine id, so that no result this machine shared is counted as its peer; the sources are read for
those keys only (Parquet shards through DuckDB, ``query.py``); the published references join as
peers of the same shape. An aggregate table among the sources (``bands.py``, or the shipped
``accelbench:published``) places each case in its band, offline.

A run's figures across cases (MLPerf Client's overall, as its record stores them) are placed too,
among the overall groups the same sources' lines carry (``compare/collection.overall_groups``, as
``Collection.overall`` is built; ``compare/overall_place.py``), without this machine's groups and
without the run's own group shared under another machine id (the same group id).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from accelbench.compare.bands import place_in_band
from accelbench.compare.collection import OverallEntry, overall_entry, overall_groups
from accelbench.compare.decode_diagnosis import bound_class
from accelbench.compare.overall_place import OverallPlacement, place_overall
from accelbench.compare.peers import (
    TOO_FEW,
    KeyPeers,
    PeerComparison,
    PeerResult,
    Placement,
    judge,
    key_peers,
    place,
    published_peers,
)
from accelbench.results import CaseResult, RunRecord
from accelbench.results.key import KEY_FIELDS
from accelbench.results.protocol_summary import overall_key, overall_members
from accelbench.sharing.bands import is_band_table, read_table
from accelbench.sharing.build import SHARED_KINDS, SelftestLookup, case_id, case_line, overall_sections
from accelbench.sharing.bundle import BadLine, dump_line, parse_line
from accelbench.sharing.machine_id import stored_machine_id
from accelbench.sharing.peer_view import peer_of
from accelbench.sharing.query import Wanted, collection_relation, count_read, overall_entries, shard_key_peers
from accelbench.sharing.shards import duckdb_connection
from accelbench.sharing.sources import Loaded, Warn, load_collection


def own_peers(record: RunRecord, selftest: SelftestLookup | None = None,
              machine: str = "") -> list[tuple[CaseResult, PeerResult]]:
    """Each finished timing case of ``record`` with its peer view. Not scrubbed: the line never
    leaves this machine, and a redacted name could match nothing."""
    if record.kind not in SHARED_KINDS:
        return []
    out = []
    sections = overall_sections(record)  # as share writes them: the same line, the same hash
    for case in record.cases:
        if not case.ok or case.skipped or not case.throughput():
            continue
        line = case_line(record, case, machine, selftest(case.device) if selftest else None,
                         overall=sections.get(id(case)))
        try:
            peer = peer_of(parse_line(dump_line(line)))
        except BadLine:  # a name no reader accepts (hostile or over-long): nothing to match
            continue
        if peer is not None:
            out.append((case, peer))
    return out


Summaries = tuple[dict[Wanted, KeyPeers] | None, list[PeerResult], Loaded, list[OverallEntry]]


def _summaries(sources: list[str], warn: Warn, mine: list[tuple[str, CaseResult, PeerResult]], machine: str,
               cases: set[str]) -> Summaries:
    """The shared results of the user's keys: bundles read line by line (returned as peers), or,
    where the sources hold Parquet shards, summarised in DuckDB with the bundles (only the
    partitions and rows of those keys; returned as each (key, device model, decode diagnosis)'s
    summary: the host rule sets aside by the user's diagnosis); and, either way, the figures
    across cases their lines carry (``collection.overall_groups``'s entries)."""
    keys, models = {peer.key for _, _, peer in mine}, {peer.model_key for _, _, peer in mine}
    loaded, files = load_collection(sources, warn, keys, settings_for=models)
    peers = loaded.peers  # quarantined as read (sources.load_peers); shards carry their own
    if not files:
        return None, peers, loaded, [entry for entry in map(overall_entry, peers) if entry is not None]
    connection = duckdb_connection(" ".join(sources))
    try:
        modes = {str(key[KEY_FIELDS.index("mode")]) for key in keys}
        rel = collection_relation(connection, files, peers, modes, loaded=loaded, warn=warn)
        wanted = {(p.key, p.model_key, p.decode) for _, _, p in mine}
        summaries = shard_key_peers(connection, rel, wanted, machine, cases)
        entries = overall_entries(connection, rel)
        # What the shards hold and kept apart, so that the summary and --json count what the
        # placements count (conflicts included).
        count_read(connection, rel, loaded, keys)
    finally:
        connection.close()
    return summaries, [], loaded, entries


@dataclass
class Against:
    """What placing runs among shared results gave: each case's placement, each stored overall
    group's (figures across cases), and what the sources held."""

    comparisons: list[PeerComparison]
    loaded: Loaded
    overall: list[OverallPlacement] = field(default_factory=list)


def compare_against(runs: Sequence[tuple[str, RunRecord]], sources: Sequence[str], warn: Warn,
                    selftest: SelftestLookup | None = None) -> tuple[list[PeerComparison], Loaded]:
    """``place_among``'s case placements and what was read."""
    placed = place_among(runs, sources, warn, selftest)
    return placed.comparisons, placed.loaded


def _overall(runs: Sequence[tuple[str, RunRecord]], mine: list[tuple[str, CaseResult, PeerResult]],
             entries: list[OverallEntry], machine: str) -> list[OverallPlacement]:
    """Each complete stored overall group of ``runs`` among the shared ones of its overall key:
    never this machine's, nor a group of the runs themselves (shared before, any machine id)."""
    own_groups = {peer.overall.group_id for _, _, peer in mine if peer.overall is not None}
    shared = overall_groups(entry for entry in entries
                            if entry[4] not in own_groups and not (machine and entry[3] == machine))
    peers = {id(case): peer for _, case, peer in mine}
    placements = []
    for label, record in runs:
        for _, overall, members in overall_members(record):
            found = next((peers[id(case)] for case in members if id(case) in peers), None)
            if found is None or overall.missing or not overall.token_rate:
                continue  # MLPerf Client gives no overall figure without every category
            key = overall_key(found.key)
            placements.append(place_overall(label, key, members[0].device, found.device_model, overall,
                                            shared.get(key, [])))
    return placements


def place_among(runs: Sequence[tuple[str, RunRecord]], sources: Sequence[str], warn: Warn,
                selftest: SelftestLookup | None = None) -> Against:
    """Every finished timing case of ``runs`` (label, record) placed among the sources' results,
    and against every aggregate table among the sources (its band of the case's key and device
    class); every stored overall group among the overall groups the sources' lines carry."""
    machine = stored_machine_id() or ""
    mine = [(label, case, peer) for label, record in runs
            for case, peer in own_peers(record, selftest, machine)]
    tables = [spec for spec in sources if is_band_table(spec)]
    collections = [spec for spec in sources if spec not in tables]
    cases = {case_id(record, case) for _, record in runs for case in record.cases}
    summaries, peers, loaded, entries = (_summaries(collections, warn, mine, machine, cases) if collections
                                         else (None, [], Loaded(), []))
    loaded.sources = list(sources)
    by_key: dict[tuple[object, ...], list[PeerResult]] = {}
    for peer in peers:
        by_key.setdefault(peer.key, []).append(peer)
    bands = [{(band.key, band.device_class, band.decode_class): band for band in read_table(spec)}
             for spec in tables]
    loaded.tables = len(tables)
    comparisons = []
    for label, case, peer in mine:
        if collections or not tables:
            published = published_peers(case.workload, case.mode, case.dataset_size)
            if summaries is None:
                placement = place(peer, by_key.get(peer.key, []) + published)
            else:
                found = summaries[(peer.key, peer.model_key, peer.decode)]
                extra = key_peers(peer, published).groups
                placement = judge(peer, replace(found, groups=sorted([*found.groups, *extra],
                                                                      key=lambda g: -g.median)))
            comparisons.append(PeerComparison(label, case.device, placement))
        for spec, table in zip(tables, bands, strict=True):
            # A generation case: the band of its decode's bound class (the host rule, as bands pool).
            decode_class = bound_class(peer.decode)
            band = table.get((peer.key, peer.device_class, decode_class))
            whose = f" ({peer.decode.bound_words or decode_class})" if decode_class and peer.decode else ""
            placement = (place_in_band(peer, band) if band is not None else
                         Placement(peer, [], None, TOO_FEW, note=f"{spec} holds no band of this work on a "
                                   f"{peer.device_class} device{whose}"))
            comparisons.append(PeerComparison(label, case.device, placement))
    return Against(comparisons, loaded, _overall(runs, mine, entries, machine) if collections else [])
