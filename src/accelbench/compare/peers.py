"""Is my machine normal? One result placed among other people's results of the same work.

A peer is a shared result (a line of a bundle, see ``accelbench.sharing``) or a published
reference with the same comparability key (``results/key.py``, the one key every comparison uses).
Peers are grouped by device model; for each group: how many results from how many machines, the
median, the spread (10th-90th percentile) and the best. Peers are counted as machines: each
machine (machine_id) is one value, the median of its results, so that one machine that shared a
hundred results weighs as much as one that shared one; the user's own machine is never its own
peer. A peer flagged implausible (``sharing/plausible.py``) or quarantined as an outlier of its
device class (``outliers.py``) is kept apart: counted, never in a band; so is a generation peer set
aside because either decode is overhead-bound on another host CPU model (``decode_diagnosis.py``).
The user's result is placed among the peers of its own device model: its percentile, its ratio to
the median, and a verdict:

  * fewer than ``MIN_PEERS`` machines of that model: "too few peers" (said, not judged);
  * inside the peers' 10th-90th percentile: "normal" for this device;
  * below or above it: "below its peers" / "above its peers", with the recorded settings in which
    the user's result differs from most peers (TF32, cuDNN benchmark, power state, threads, torch
    version, loader workers, noisy ...) as likely reasons. A setting ranks higher when the peers
    that share the user's value measured close to the user's figure.

The figure is the key's headline rate (``results/catalogue.headline``: samples per second at the
median step time, or a generation case's decode tokens/s over the batch), the same for every peer.
This module knows nothing of the bundle format: ``PeerResult`` is the neutral shape both the
sharing code and the published references are turned into. Placing reads a summary of the peers
(``KeyPeers``: the groups, the user's model's machine values and settings stats), which
``key_peers`` builds from peers and ``sharing/query.py`` from Parquet shards in SQL, so that ten
million results are placed without ten million objects.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelbench.compare.decode_diagnosis import DecodeDiagnosis, host_mismatch
from accelbench.devices.kinds import KNOWN_KINDS
from accelbench.reference.published import TF32_CAVEAT, EpochReference, epoch_references
from accelbench.results.key import KEY_DEFAULTS, KEY_FIELDS

#: Below this many results of the user's device model, the verdict is "too few peers".
MIN_PEERS = 5
#: The band a normal result falls in: the peers' 10th to 90th percentile.
LOW_PERCENTILE, HIGH_PERCENTILE = 10, 90
NORMAL, BELOW, ABOVE, TOO_FEW = "normal", "below its peers", "above its peers", "too few peers"
#: At most this many likely reasons are named for one verdict.
MAX_REASONS = 4


@dataclass(frozen=True, slots=True)
class PeerOverall:
    """A shared run's figures across cases (results/protocol_overall.py: MLPerf Client's overall
    geometric means over its categories), as each line of its group carries them: ``group_id``
    tells the group apart (a run's five category lines carry one group), so it counts once.
    Only a complete group (every category finished) is one."""

    group_id: str
    protocol: str
    #: How many categories the means are over.
    categories: int
    #: Catalogue ``mlperf_ttft_geomean_s``.
    ttft_s: float
    #: Catalogue ``mlperf_token_rate_geomean``.
    token_rate: float


@dataclass(frozen=True, slots=True)
class PeerResult:
    """One result as peers see it: what work (key), on what (device model), how fast, and the
    recorded settings that can explain the figure (label -> shown value)."""

    key: tuple[Any, ...]
    device_kind: str
    device_model: str
    throughput: float
    settings: Mapping[str, str] = field(default_factory=dict)
    machine_id: str = ""
    content_hash: str = ""
    #: The citation of a published reference; "" for a shared (measured) result.
    published: str = ""
    caveats: str = ""
    #: Samples per epoch of the work (lets a published epoch time become a throughput).
    dataset_size: int = 0
    #: Why the figure cannot be right (beyond its own device's physical limits, or its tokens
    #: do not match): implausible, kept apart; "" when plausible.
    invalid: str = ""
    #: Why the result is quarantined (beyond the 99.5th percentile of its device class for this
    #: work): kept apart like an implausible one; "" when not.
    outlier: str = ""
    #: How many results this peer stands for: 1, or a machine's median over n results where a
    #: large collection was reduced per machine as it was read (sharing/query.py).
    results: int = 1
    #: The day the result was measured (YYYY-MM-DD; "" when not known).
    date: str = ""
    #: A generation line's decode bound, host CPU and execution (None: not judged, or no decode).
    decode: DecodeDiagnosis | None = None
    #: The figures across cases its line carries (MLPerf Client's overall, stored with its run:
    #: the same on every line of its group); None where it carries none.
    overall: PeerOverall | None = None

    @property
    def model_key(self) -> str:
        return model_key(self.device_model)

    @property
    def apart(self) -> bool:
        """Kept out of every band: implausible or quarantined."""
        return bool(self.invalid or self.outlier)

    @property
    def device_class(self) -> str:
        return device_class(self.device_kind)


def model_key(model: str) -> str:
    """Device models group case- and space-insensitively ("NVIDIA  A100" is "nvidia a100")."""
    return " ".join(model.split()).casefold()


#: The device classes a collection is partitioned and aggregated by: the CPU, each accelerator
#: kind accelbench knows, and every other torch.accelerator kind as one.
DEVICE_CLASSES = ("cpu", *KNOWN_KINDS, "other")


def device_class(kind: str) -> str:
    return kind if kind in DEVICE_CLASSES else "other"


@dataclass(frozen=True)
class ModelGroup:
    """The peers of one device model for one key: median and band are over machines (each
    machine's median result); best is the fastest single result, a figure a run produced (a
    machine's median of two results is not one)."""

    device_model: str
    count: int
    machines: int
    median: float
    low: float
    high: float
    best: float
    published: str = ""
    #: A generation group's execution recipe and decode bound (collection.py; "" otherwise).
    recipe: str = ""
    decode: str = ""


@dataclass(frozen=True)
class Placement:
    """The user's result among its peers: every device model's group, and the verdict."""

    mine: PeerResult
    groups: list[ModelGroup]
    #: The group of the user's own device model (None when no peer has it).
    own: ModelGroup | None
    verdict: str
    percentile: float | None = None
    ratio_to_median: float | None = None
    reasons: list[str] = field(default_factory=list)
    #: Results of the same work flagged implausible (kept apart, in no group), and why (each
    #: reason once).
    invalid: int = 0
    invalid_reasons: list[str] = field(default_factory=list)
    #: Results of the same work quarantined as outliers of their device class, and why.
    outliers: int = 0
    outlier_reasons: list[str] = field(default_factory=list)
    #: Results of the same work not compared with this one, and why: an overhead-bound decode on
    #: one side and another host CPU model on the other (compare/decode_diagnosis.host_mismatch).
    set_aside: int = 0
    set_aside_reasons: list[str] = field(default_factory=list)
    #: What the peers are, where it is not the shared results themselves (an aggregate table).
    note: str = ""

    @property
    def peer_count(self) -> int:
        return sum(group.count for group in self.groups)

    @property
    def machine_count(self) -> int:
        return sum(group.machines for group in self.groups)


@dataclass(frozen=True)
class PeerComparison:
    """One of the user's cases (run label, device) placed among its peers."""

    run_label: str
    device: str
    placement: Placement


def percentiles(values: Sequence[float]) -> tuple[float, float, float]:
    """(the 10th percentile, the median, the 90th percentile) of ``values``: a group's band."""
    array = np.asarray(values, dtype=float)
    low, median, high = np.percentile(array, [LOW_PERCENTILE, 50, HIGH_PERCENTILE])
    return float(low), float(median), float(high)


def by_machine(peers: Iterable[PeerResult]) -> dict[object, list[PeerResult]]:
    """A result without a machine id (a published figure) is a machine of its own."""
    by_machine: dict[object, list[PeerResult]] = {}
    for index, peer in enumerate(peers):
        by_machine.setdefault(peer.machine_id or index, []).append(peer)
    return by_machine


def median(values: Sequence[float]) -> float:
    """numpy's median (the mean of the two middle values of an even count), without numpy's cost
    per call: a collection takes one per machine, and most machines have one or two results."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return float(ordered[middle]) if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def machine_values(peers: Sequence[PeerResult]) -> list[float]:
    """One value per machine: the median of its results."""
    return [median([p.throughput for p in members]) for members in by_machine(peers).values()]


def _group(peers: Sequence[PeerResult]) -> ModelGroup:
    values = machine_values(peers)
    low, median, high = percentiles(values)
    spellings: Counter[str] = Counter()
    for peer in peers:
        spellings[peer.device_model] += peer.results
    published = "; ".join(dict.fromkeys(p.published for p in peers if p.published))
    return ModelGroup(spelling(spellings), sum(p.results for p in peers), len(values), median,
                      low, high, max(p.throughput for p in peers), published)


def spelling(counts: Counter[str]) -> str:
    """A device model's most common spelling; a tie goes to the first in text order (the rule the
    SQL of sharing/query.py follows too)."""
    return min(counts, key=lambda name: (-counts[name], name))


def _by_model(peers: Iterable[PeerResult]) -> dict[tuple[str, bool], list[PeerResult]]:
    """Peers in a band (neither implausible nor quarantined) by device model; a published figure
    is never pooled with measured ones."""
    by_model: dict[tuple[str, bool], list[PeerResult]] = {}
    for peer in peers:
        if not peer.apart:
            by_model.setdefault((peer.model_key, bool(peer.published)), []).append(peer)
    return by_model


def group_peers(peers: Iterable[PeerResult]) -> list[ModelGroup]:
    """Valid peers (of one key) grouped by device model, fastest median first; published figures
    form groups of their own, never pooled with measured ones."""
    return sorted((_group(members) for members in _by_model(peers).values()), key=lambda g: -g.median)


def percentile_of(value: float, values: Sequence[float]) -> float:
    """The share of ``values`` below ``value`` (ties count half), in percent."""
    below = sum(v < value for v in values)
    equal = sum(v == value for v in values)
    return 100.0 * (below + 0.5 * equal) / len(values)


def _ratio_text(ratio: float) -> str:
    return f"{ratio:.2f}x"


#: Label -> value -> (results that stated it, their median rate): what the likely reasons read.
SettingStats = dict[str, dict[str, tuple[int, float]]]


def setting_stats(pairs: Iterable[tuple[Mapping[str, str], Sequence[float]]]) -> SettingStats:
    """The stats of results given as (settings, the rates of the results that recorded them)."""
    rates: dict[str, dict[str, list[float]]] = {}
    for settings, values in pairs:
        for label, value in settings.items():
            rates.setdefault(label, {}).setdefault(value, []).extend(values)
    return {label: {value: (len(v), float(np.median(v))) for value, v in by_value.items()}
            for label, by_value in rates.items()}


def likely_reasons(mine: PeerResult, stats: SettingStats) -> list[str]:
    """Settings in which ``mine`` differs from most of the peers that state them, closest first.

    "TF32 (matmul) off; peers: on (18 of 20); the 2 with off: median 0.14x of the rest" - the
    last part says whether the setting goes with the difference among the peers themselves."""
    ranked: list[tuple[float, str]] = []
    for label, value in mine.settings.items():
        by_value = stats.get(label)
        if not by_value:
            continue
        stated = sum(count for count, _ in by_value.values())
        # The most common value; a tie goes to the first in text order (the same on every path).
        common = min(by_value, key=lambda v: (-by_value[v][0], v))
        common_count = by_value[common][0]
        if common == value or common_count * 2 < stated:
            continue
        text = f"{label} {value}; peers: {common} ({common_count} of {stated})"
        closeness = math.inf
        if value in by_value:
            same, with_mine = by_value[value]
            typical = by_value[common][1]
            text += f"; the {same} with {value}: {_ratio_text(with_mine / typical)} of the others"
            closeness = abs(math.log(with_mine / mine.throughput))
        ranked.append((closeness, text))
    ranked.sort(key=lambda item: item[0])
    return [text for _, text in ranked[:MAX_REASONS]]


@dataclass(frozen=True)
class KeyPeers:
    """What placing a result reads of its peers of one key (without the user's own machine): every
    device model's group, the machine values and recorded settings of the user's model, and what
    was kept apart. Built from peers here, or by ``sharing/query.py`` in SQL from Parquet shards."""

    groups: list[ModelGroup]
    machine_values: list[float] = field(default_factory=list)
    settings: SettingStats = field(default_factory=dict)
    apart: dict[str, Any] = field(default_factory=dict)


def same_work(mine: PeerResult, peers: Iterable[PeerResult]) -> list[PeerResult]:
    """The peers of ``mine``'s key, without ``mine`` itself (shared before: same content hash) and
    without every result of the user's own machine (``mine.machine_id``)."""
    return [p for p in peers if p.key == mine.key and p.throughput > 0
            and not (mine.content_hash and p.content_hash == mine.content_hash)
            and not (mine.machine_id and p.machine_id == mine.machine_id)]


def set_aside(mine: PeerResult, peers: Sequence[PeerResult]) -> tuple[list[PeerResult], dict[str, Any]]:
    """(the peers ``mine`` is compared with, those set aside counted by reason): where either
    side's decode is overhead-bound, only the same host CPU model (decode_diagnosis.host_mismatch)."""
    if mine.decode is None:
        return list(peers), {}
    kept, reasons = [], Counter[str]()
    for peer in peers:
        reason = host_mismatch(mine.decode, peer.decode)
        if reason:
            reasons[reason] += peer.results
        else:
            kept.append(peer)
    return kept, ({"set_aside": sum(reasons.values()), "set_aside_reasons": sorted(reasons)} if reasons
                  else {})


def key_peers(mine: PeerResult, peers: Iterable[PeerResult]) -> KeyPeers:
    work, aside = set_aside(mine, same_work(mine, peers))
    by_model = _by_model(work)
    own = by_model.get((mine.model_key, False), [])
    groups = sorted((_group(members) for members in by_model.values()), key=lambda g: -g.median)
    rates: dict[tuple[tuple[str, str], ...], list[float]] = {}
    for peer in own:
        rates.setdefault(tuple(peer.settings.items()), []).append(peer.throughput)
    return KeyPeers(groups, machine_values(own), setting_stats((dict(k), v) for k, v in rates.items()),
                    {**_apart(work), **aside})


def place(mine: PeerResult, peers: Iterable[PeerResult]) -> Placement:
    """``mine`` among ``peers`` (which may include results of other keys: they are left out, and so
    is ``mine`` itself when it was shared before: same content hash, and every result of the
    user's own machine: ``mine.machine_id``)."""
    return judge(mine, key_peers(mine, peers))


def judge(mine: PeerResult, peers: KeyPeers) -> Placement:
    """``mine`` against the summary of its peers: the verdict by the one rule, its percentile among
    the machines of its device model, and the likely reasons."""
    groups = peers.groups
    own = next((g for g in groups if model_key(g.device_model) == mine.model_key and not g.published),
               None)
    if own is None or own.machines < MIN_PEERS:
        return Placement(mine, groups, own, TOO_FEW, **peers.apart)
    percentile = percentile_of(mine.throughput, peers.machine_values)
    verdict = band_verdict(mine.throughput, own.low, own.high)
    reasons = likely_reasons(mine, peers.settings) if verdict != NORMAL else []
    return Placement(mine, groups, own, verdict, percentile, mine.throughput / own.median, reasons,
                     **peers.apart)


def _apart(peers: Sequence[PeerResult]) -> dict[str, Any]:
    """How many results were kept apart, and why (each reason once)."""
    invalid = [p for p in peers if p.invalid]
    outliers = [p for p in peers if p.outlier and not p.invalid]
    return {"invalid": sum(p.results for p in invalid),
            "invalid_reasons": sorted({p.invalid for p in invalid}),
            "outliers": sum(p.results for p in outliers),
            "outlier_reasons": sorted({p.outlier for p in outliers})}


def band_verdict(value: float, low: float, high: float) -> str:
    """The one rule: inside the band [low, high] is normal, else below or above it."""
    if value < low:
        return BELOW
    if value > high:
        return ABOVE
    return NORMAL


# --- published references as peers ----------------------------------------------------------------
def _published_key(ref: EpochReference, workload: str, kind: str) -> tuple[Any, ...]:
    """What the published run did, in the key's terms: the published configuration on real data;
    fp32 on an Ampere-or-later GPU ran cuDNN in TF32 (the reference's caveat says so)."""
    precision = "tf32" if TF32_CAVEAT in ref.caveats and kind == "cuda" else "fp32"
    fields = {"workload": workload, "workload_version": 1, "mode": ref.mode,
              "batch_size": ref.batch_size, "precision": precision, "compile_backend": "",
              "channels_last": False, "data": "real", "size": "published"}
    return tuple(fields.get(name, KEY_DEFAULTS[name]) for name in KEY_FIELDS)


def published_peers(workload: str, mode: str, dataset_size: int) -> list[PeerResult]:
    """The published epoch times of ``workload`` as peers: throughput = dataset size / epoch time
    (an epoch as published may include evaluation: the caveats say so). The CPU column and the
    accelerator column of a published row are two results."""
    if dataset_size <= 0:
        return []
    peers = []
    for ref in epoch_references(workload, mode):
        for kind, seconds, model in (("cpu", ref.cpu_epoch_s, f"CPU of {ref.machine}"),
                                     (ref.accelerator, ref.accel_epoch_s, ref.machine)):
            if seconds and kind:
                peers.append(PeerResult(_published_key(ref, workload, kind), kind, model,
                                        dataset_size / seconds,
                                        published=ref.source.citation, caveats=ref.caveats,
                                        dataset_size=dataset_size))
    return peers
