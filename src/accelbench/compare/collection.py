"""A collection of shared results summarised for a site: per comparability key, each device
model's group (count, machines, median, 10th-90th percentile, best, over machines), the results
kept apart and why, and per device model the settings its results recorded. A generation key's
groups are split by the decode's bound class (overhead-bound results per host CPU model) and say
their recipe and bound (``decode_diagnosis.py``).
Beside them, the figures across cases the results' lines carry (MLPerf Client's overall geometric
means, stored with each run: ``overall_groups``), per overall key and device model.

Two builders give the same summary: ``collect`` from peers (the path without DuckDB), and
``sharing/query.py`` from Parquet shards in SQL (a test holds the two equal). The renderer
(``render/site.py``) reads only this, so a site of ten million results is built from a few
thousand groups, never from the results themselves.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.compare.decode_diagnosis import bound_class, group_words
from accelbench.compare.peers import (
    ModelGroup,
    PeerOverall,
    PeerResult,
    group_peers,
    model_key,
    percentiles,
    published_peers,
    spelling,
)
from accelbench.results.key import KEY_FIELDS
from accelbench.results.protocol_summary import overall_key

KeyTuple = tuple[Any, ...]


@dataclass
class KeySummary:
    """One kind of work: its device models' groups (measured and published, fastest median
    first), the results kept apart by reason, and its results' most common dataset size."""

    groups: list[ModelGroup] = field(default_factory=list)
    #: Reason -> results kept apart for it (implausible or quarantined).
    apart: Counter[str] = field(default_factory=Counter)
    dataset_size: int = 0

    @property
    def measured(self) -> list[ModelGroup]:
        return [g for g in self.groups if not g.published]


@dataclass(frozen=True)
class OverallGroup:
    """One device model's shared figures across cases for one overall key: the groups (runs) that
    shared them and from how many machines, and the median over machines (each machine's median
    group) of each stored figure; a lone group's figures are its own, as its run stored them."""

    device_model: str
    groups: int
    machines: int
    categories: int
    #: Medians over machines of the stored ``mlperf_ttft_geomean_s`` and ``mlperf_token_rate_geomean``.
    ttft_s: float
    token_rate: float
    #: Each machine's median stored token rate, in ascending order: what a run is placed among
    #: (``compare/overall_place.py``: its percentile and the 10th-90th percentile band).
    machine_rates: tuple[float, ...] = ()

    def band(self) -> tuple[float, float] | None:
        """The 10th-90th percentile of the machines' token rates, as a case's group has it (None
        where the group holds no machine rates)."""
        if not self.machine_rates:
            return None
        low, _, high = percentiles(self.machine_rates)
        return low, high


#: One shared group as both builders read it: (overall key, model_key, device model spelling,
#: machine, group id, the group's PeerOverall).
OverallEntry = tuple[KeyTuple, str, str, str, str, PeerOverall]


def overall_entry(peer: PeerResult) -> OverallEntry | None:
    """A peer's figures across cases as ``overall_groups`` reads them; None where it carries none
    or is kept apart (flagged implausible or quarantined: in no band, as its case is in none)."""
    if peer.overall is None or peer.apart:
        return None
    return (overall_key(peer.key), peer.model_key, peer.device_model, peer.machine_id,
            peer.overall.group_id, peer.overall)


def overall_groups(entries: Iterable[OverallEntry]) -> dict[KeyTuple, list[OverallGroup]]:
    """Each overall key's groups per device model, each shared group counted once (its lines all
    carry it: the first is taken), its figures read as stored, never recomputed from categories."""
    seen: set[tuple[str, str]] = set()
    found: dict[tuple[KeyTuple, str], dict[str, list[PeerOverall]]] = {}
    spellings: dict[str, Counter[str]] = {}
    for key, model, spelled, machine, group, overall in entries:
        if not machine or machine.startswith("~"):  # no machine id (shards: "~" and a line hash)
            machine = "~" + group  # the group is a machine of its own, as on both paths
        if (machine, group) in seen:
            continue
        seen.add((machine, group))
        found.setdefault((key, model), {}).setdefault(machine, []).append(overall)
        spellings.setdefault(model, Counter())[spelled] += 1
    out: dict[KeyTuple, list[OverallGroup]] = {}
    for (key, model), machines in found.items():
        ttfts = [statistics.median(o.ttft_s for o in mine) for mine in machines.values()]
        rates = [statistics.median(o.token_rate for o in mine) for mine in machines.values()]
        every = [o for mine in machines.values() for o in mine]
        out.setdefault(key, []).append(OverallGroup(
            spelling(spellings[model]), len(every), len(machines), max(o.categories for o in every),
            statistics.median(ttfts), statistics.median(rates), tuple(sorted(rates))))
    for groups in out.values():
        groups.sort(key=lambda g: (-g.token_rate, g.device_model))
    return out


@dataclass
class Collection:
    keys: dict[KeyTuple, KeySummary] = field(default_factory=dict)
    #: Device model (model_key) -> (its most common spelling, Counter of (setting, value) over results).
    settings: dict[str, tuple[str, Counter[tuple[str, str]]]] = field(default_factory=dict)
    #: Figures across cases (MLPerf Client's overall), per overall key (``protocol_summary.overall_key``:
    #: the key without the lengths) and device model, fastest median token rate first.
    overall: dict[KeyTuple, list[OverallGroup]] = field(default_factory=dict)
    results: int = 0
    machines: int = 0

    @property
    def apart(self) -> int:
        return sum(sum(summary.apart.values()) for summary in self.keys.values())


def with_published(key: KeyTuple, summary: KeySummary) -> None:
    """Add the published references that did this work, sized by the measured results' most
    common dataset size (a published epoch time becomes samples per second)."""
    if not summary.dataset_size:
        return
    fields = dict(zip(KEY_FIELDS, key, strict=True))
    extra = [p for p in published_peers(str(fields["workload"]), str(fields["mode"]), summary.dataset_size)
             if p.key == key]
    if extra:
        summary.groups = sorted([*summary.groups, *group_peers(extra)], key=lambda g: -g.median)


def _groups(members: list[PeerResult]) -> list[ModelGroup]:
    """Each device model's group, fastest median first. Generation results are grouped by their
    decode's bound class too (overhead-bound ones per host CPU model: a host's launch rate is never
    pooled with another host's), each group named with its recipe and bound."""
    if not any(peer.decode for peer in members):
        return group_peers(members)
    classes: dict[str, list[PeerResult]] = {}
    for peer in members:
        classes.setdefault(bound_class(peer.decode), []).append(peer)
    groups = []
    for part in classes.values():
        for group in group_peers(part):
            recipe, bound = group_words([p.decode for p in part if bool(p.published) == bool(group.published)
                                         and p.model_key == model_key(group.device_model)])
            groups.append(replace(group, recipe=recipe, decode=bound))
    return sorted(groups, key=lambda g: -g.median)


def collect(peers: Iterable[PeerResult]) -> Collection:
    """The summary of ``peers`` (published references of the same work added)."""
    by_key: dict[KeyTuple, list[PeerResult]] = {}
    collection = Collection()
    spellings: dict[str, Counter[str]] = {}
    machines = set()
    overall: list[OverallEntry] = []
    for peer in peers:
        summary = collection.keys.setdefault(peer.key, KeySummary())
        if peer.apart:
            summary.apart[peer.invalid or peer.outlier] += peer.results
            continue
        entry = overall_entry(peer)
        if entry is not None:
            overall.append(entry)
        by_key.setdefault(peer.key, []).append(peer)
        collection.results += peer.results
        if peer.machine_id:
            machines.add(peer.machine_id)
        name = peer.model_key
        spellings.setdefault(name, Counter())[peer.device_model] += peer.results
        counts = collection.settings.setdefault(name, ("", Counter()))[1]
        for label, value in peer.settings.items():
            counts[(label, value)] += peer.results
    for key, members in by_key.items():
        summary = collection.keys[key]
        summary.groups = _groups(members)
        sizes = Counter(p.dataset_size for p in members if p.dataset_size)
        summary.dataset_size = sizes.most_common(1)[0][0] if sizes else 0
        with_published(key, summary)
    collection.settings = {name: (spelling(spellings[name]), counts)
                           for name, (_, counts) in collection.settings.items()}
    collection.overall = overall_groups(overall)
    collection.machines = len(machines)
    return collection


def model_groups(collection: Collection, name: str) -> list[tuple[KeyTuple, ModelGroup]]:
    """Every work device model ``name`` (model_key) did, with its group."""
    found = []
    for key, summary in collection.keys.items():
        for group in summary.measured:
            if model_key(group.device_model) == name:
                found.append((key, group))
    return found
