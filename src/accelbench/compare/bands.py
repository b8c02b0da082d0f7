"""Place a result without downloading everyone: the band of each kind of work, pre-aggregated.

A band is, for one comparability key (``results/key.py``) and one device class (``cpu``, ``cuda``,
``mps``, ``xpu``, ``other``: ``peers.DEVICE_CLASSES``), how many machines and results did that work,
the 1st to 99th percentiles of the machines' headline rates (each machine one value, the median of
its results, as everywhere peers are counted), and the first and last day measured. Implausible
and quarantined results are in no band. A generation key's results are banded by their decode's
bound class as the site pools them (``decode_diagnosis.bound_class``: overhead-bound results per
host CPU model, bandwidth-bound ones together, those not judged together), so that an
overhead-bound result is placed only among results of its host CPU model (the host rule), and a
band says its recipe and bound. A band exists only with at least ``MIN_MACHINES``
machines, so that no band describes one or two people; the published references (which are one
machine each) are the documented exception, marked ``published`` and judged "too few peers".

This module computes bands from peers (``bands_of``, the path without DuckDB; ``sharing/query.py``
computes the same from Parquet shards in SQL and a test holds the two equal) and places a result
in one (``place_in_band``, the rule of ``peers.place``: inside the 10th-90th percentile is normal).
The file format of a table of bands is ``sharing/bands.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.compare.decode_diagnosis import bound_class, group_words
from accelbench.compare.peers import (
    HIGH_PERCENTILE,
    LOW_PERCENTILE,
    MIN_PEERS,
    TOO_FEW,
    ModelGroup,
    PeerResult,
    Placement,
    band_verdict,
    machine_values,
)

#: A band is written only for a key and device class that this many machines measured.
MIN_MACHINES = 10
#: The percentiles a band holds: 1 to 99.
PERCENTILES = tuple(range(1, 100))


@dataclass(frozen=True)
class Band:
    key: tuple[Any, ...]
    device_class: str
    machines: int
    results: int
    #: The 1st to 99th percentiles of the machines' rates (PERCENTILES), ascending.
    percentiles: tuple[float, ...]
    first_date: str
    last_date: str
    #: The citation where the band was built from published references ("" when measured).
    published: str = ""
    #: A generation band's decode bound class (``decode_diagnosis.bound_class``; "" otherwise, or
    #: not judged) and its results' recipe and bound (``decode_diagnosis.group_words``).
    decode_class: str = ""
    recipe: str = ""
    decode: str = ""

    def at(self, percentile: int) -> float:
        return self.percentiles[PERCENTILES.index(percentile)]

    def position(self, value: float) -> float:
        """Where ``value`` lies among the machines, in percent (0 below the 1st, 100 above the 99th)."""
        return float(np.interp(value, self.percentiles, PERCENTILES, left=0.0, right=100.0))


def band_percentiles(values: Sequence[float]) -> tuple[float, ...]:
    """Linear interpolation between order statistics (numpy's default; DuckDB's quantile_cont)."""
    return tuple(float(v) for v in np.percentile(np.asarray(values, dtype=float), PERCENTILES))


def bands_of(peers: Iterable[PeerResult], min_machines: int = MIN_MACHINES) -> list[Band]:
    """The bands of ``peers`` (any keys, any device classes), those with at least ``min_machines``
    machines; ordered by key and class."""
    groups: dict[tuple[tuple[Any, ...], str, str], list[PeerResult]] = {}
    for peer in peers:
        if not peer.apart and not peer.published:
            groups.setdefault((peer.key, peer.device_class, bound_class(peer.decode)), []).append(peer)
    bands = []
    for (key, kind, decode_class), members in groups.items():
        values = machine_values(members)
        if len(values) < min_machines:
            continue
        dates = sorted(p.date for p in members if p.date)
        recipe, bound = group_words([p.decode for p in members])
        bands.append(Band(key, kind, len(values), sum(p.results for p in members), band_percentiles(values),
                          dates[0] if dates else "", dates[-1] if dates else "", "", decode_class, recipe,
                          bound))
    return sorted(bands, key=band_order)


def band_order(band: Band) -> tuple[str, ...]:
    return (*(str(v) for v in band.key), band.device_class, band.decode_class)


def place_in_band(mine: PeerResult, band: Band) -> Placement:
    """``mine`` against the band of its key and device class: the peers' table row is the band
    (median = 50th percentile, band = 10th-90th, best shown = 99th), the verdict by the one rule,
    "too few peers" below MIN_PEERS machines (a published band)."""
    label = f"all {band.device_class} devices ({'published' if band.published else 'aggregate'})"
    group = ModelGroup(label, band.results, band.machines, band.at(50), band.at(LOW_PERCENTILE),
                       band.at(HIGH_PERCENTILE), band.at(99), band.published, band.recipe, band.decode)
    note = (f"an aggregate band over every {band.device_class} device model: {band.machines:,} machine(s), "
            f"{band.results:,} result(s), {band.first_date or '?'} to {band.last_date or '?'}; its best "
            "is the 99th percentile; it counts every machine that shared this work, this one too where "
            "it did (a table holds no machine ids to leave it out)")
    if band.decode:
        note += f"; its results: {band.decode}"
    if band.published:
        note += f"; built from published references ({band.published}), below the {MIN_MACHINES}-machine rule"
    if band.machines < MIN_PEERS:
        return Placement(mine, [group], group, TOO_FEW, note=note)
    verdict = band_verdict(mine.throughput, group.low, group.high)
    return Placement(mine, [group], group, verdict, band.position(mine.throughput),
                     mine.throughput / group.median, note=note)
