"""Outliers: a machine far above the other machines of its device model for the same work is
quarantined (kept, with the reason, out of every band), never deleted.

The rule is robust, so that the outliers cannot set their own threshold (a percentile can: ten
forged machines at 1,000x among a few thousand became the 99.5th percentile and went unflagged).
Per comparability key and device model (``model_key``), over machines (each machine's median
result), on the logarithm of the rate (rates spread by factors, not by amounts): the median ``m``
and the median absolute deviation ``MAD``; a machine is an outlier when its log rate is more than
``max(MAD_LIMIT x 1.4826 x MAD, ln(MIN_FACTOR))`` above ``m`` (1.4826 x MAD estimates a normal
spread's standard deviation). The median and the MAD stay put until half the machines are forged.
``MIN_FACTOR`` keeps a tight group (every machine within a few percent) from quarantining an
honest machine that runs, say, with more threads. Only the high side is quarantined: a slow
machine is what a placement exists to explain ("below its peers", with likely reasons).

``hub compact`` applies the same rule in SQL over a whole hub (``hub/compact.py``), with these
words (a test holds the two paths to the same machines).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from accelbench.compare.peers import PeerResult, by_machine, median

#: A machine is quarantined when its log rate is more than this many scaled MADs above the median.
MAD_LIMIT = 6.0
#: ... and at least this factor above the median machine of its device model.
MIN_FACTOR = 4.0
#: The MAD's factor that estimates a normal distribution's standard deviation.
MAD_SCALE = 1.4826
#: The rule applies from this many machines of a device model (fewer: nothing to hold one against).
OUTLIER_MIN_MACHINES = 5
#: The quarantine of two lines of one machine and case whose figures disagree (either may be
#: forged: ``sharing/conflicts.py``); such a line takes no part in the outlier rule either.
CONFLICT = ("in conflict: another line of the same machine and case has other figures (one of them is "
            "forged); both kept out of every band")
#: The rule's name in summaries.
OUTLIER_RULE = f"more than {MIN_FACTOR:g}x and {MAD_LIMIT:g} MADs above their device model's median"


def log_limit(mad: float) -> float:
    """How far above the median (in natural log) a machine may lie: the one threshold."""
    return max(MAD_LIMIT * MAD_SCALE * mad, math.log(MIN_FACTOR))


def outlier_reason(threshold: float, median_rate: float, machines: int, model: str) -> str:
    """The one wording of a quarantine (the Parquet path writes the same words): one per group,
    so that a footnote lists groups, not every quarantined machine."""
    return (f"above {threshold:.4g} ({threshold / median_rate:.3g}x the median {median_rate:.4g} of the "
            f"{machines:,} {model} machines that did this work; {OUTLIER_RULE})")


def mark_outliers(peers: Sequence[PeerResult]) -> list[PeerResult]:
    """``peers`` with every result of a machine far above its (key, device model) group
    quarantined (``outlier`` set, kept). Implausible results, published figures, results without
    a machine id and lines in conflict take no part; a result already quarantined keeps its reason
    (marking twice gives the same machines: they take part as before)."""
    groups: dict[tuple[tuple[Any, ...], str], list[PeerResult]] = {}
    for peer in peers:
        if not peer.invalid and not peer.published and peer.machine_id and peer.outlier != CONFLICT:
            groups.setdefault((peer.key, peer.model_key), []).append(peer)
    reasons: dict[int, str] = {}
    for members in groups.values():
        machines = by_machine(members)
        if len(machines) < OUTLIER_MIN_MACHINES:
            continue
        logs = {machine: math.log(median([p.throughput for p in results]))
                for machine, results in machines.items()}
        centre = median(list(logs.values()))
        limit = centre + log_limit(median([abs(v - centre) for v in logs.values()]))
        flagged = [machine for machine, value in logs.items() if value > limit]
        if not flagged:
            continue
        reason = outlier_reason(math.exp(limit), math.exp(centre), len(machines),
                                min(p.device_model for p in members))
        for machine in flagged:
            for peer in machines[machine]:
                reasons[id(peer)] = reason
    if not reasons:
        return list(peers)
    return [replace(p, outlier=reasons[id(p)]) if id(p) in reasons and not p.outlier else p for p in peers]
