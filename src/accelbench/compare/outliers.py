"""Outliers: a result beyond the 99.5th percentile of its device class for its work is quarantined
(kept, with the reason, out of every band), never deleted. ``hub compact`` applies the same rule
in SQL over a whole hub, with these words (a test holds the two paths to the same machines)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from accelbench.compare.peers import PeerResult, by_machine, median

#: A result beyond this percentile of its device class (over machines, for its key) is quarantined.
OUTLIER_PERCENTILE = 99.5
#: Below this many machines in a (key, device class) group the 99.5th percentile is the group's
#: own maximum (interpolated between its top two machines), so the rule would quarantine the
#: fastest machine of every small group: it applies from this many machines, where at least one
#: machine lies above the percentile by the data, not by construction.
OUTLIER_MIN_MACHINES = 200


def outlier_reason(threshold: float, machines: int, kind: str) -> str:
    """The one wording of a quarantine (the Parquet path writes the same words): one per group,
    so that a footnote lists groups, not every quarantined machine."""
    return (f"beyond the {OUTLIER_PERCENTILE:g}th percentile ({threshold:.4g}) of the {machines:,} {kind} "
            "machines that did this work")


def mark_outliers(peers: Sequence[PeerResult]) -> list[PeerResult]:
    """``peers`` with every result of a machine whose median is beyond the 99.5th percentile of
    its (key, device class) group quarantined (``outlier`` set, kept). Implausible results,
    published figures and results without a machine id take no part; a result already
    quarantined keeps its reason."""
    groups: dict[tuple[tuple[Any, ...], str], list[PeerResult]] = {}
    for peer in peers:
        if not peer.invalid and not peer.published and peer.machine_id:
            groups.setdefault((peer.key, peer.device_class), []).append(peer)
    reasons: dict[int, str] = {}
    for (_, kind), members in groups.items():
        machines = by_machine(members)
        if len(machines) < OUTLIER_MIN_MACHINES:
            continue
        values = {machine: median([p.throughput for p in results]) for machine, results in machines.items()}
        threshold = float(np.percentile(list(values.values()), OUTLIER_PERCENTILE))
        for machine, value in values.items():
            if value > threshold:
                for peer in machines[machine]:
                    reasons[id(peer)] = outlier_reason(threshold, len(machines), kind)
    if not reasons:
        return list(peers)
    return [replace(p, outlier=reasons[id(p)]) if id(p) in reasons and not p.outlier else p for p in peers]
