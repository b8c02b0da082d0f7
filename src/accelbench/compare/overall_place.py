"""Is my run normal across its categories? A run's figures across cases (MLPerf Client's overall
geometric means, as its record stores them: results/protocol_overall.py) placed among the shared
runs' overall figures of the same work (``collection.OverallGroup``: the same overall key, that
is the comparability key without the categories' lengths), by the rule a case is placed by
(``peers.py``): among the machines of its own device model (each machine's median run one value,
this machine's own runs never its peers), its 2nd+ token rate's percentile, its ratio to their
median and the verdict (normal inside their 10th-90th percentile, below or above it, too few
peers under ``MIN_PEERS`` machines). Its TTFT is read against their median TTFT beside it. Every
figure is a stored one: the run's, and the shared runs' as their lines carry them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.compare.collection import OverallGroup
from accelbench.compare.peers import MIN_PEERS, TOO_FEW, band_verdict, model_key, percentile_of
from accelbench.results.protocol_overall import Overall

KeyTuple = tuple[Any, ...]


@dataclass(frozen=True)
class OverallPlacement:
    """One of the user's stored overall groups among the shared ones of its overall key."""

    run_label: str
    #: The group's overall key (``protocol_summary.overall_key``) and the device model its lines name.
    key: KeyTuple
    device: str
    device_model: str
    #: The user's group as its record stores it.
    overall: Overall
    #: Every device model's shared group of the key, fastest median token rate first.
    groups: list[OverallGroup]
    #: The group of the user's own device model (None when no peer has it).
    own: OverallGroup | None
    verdict: str
    percentile: float | None = None
    #: The stored 2nd+ token rate over the own device model's median.
    ratio_to_median: float | None = None
    #: The stored TTFT over the own device model's median TTFT (above 1: slower to the first token).
    ttft_ratio_to_median: float | None = None

    @property
    def peer_count(self) -> int:
        """Shared runs (groups) of the key, over every device model."""
        return sum(group.groups for group in self.groups)

    @property
    def machine_count(self) -> int:
        return sum(group.machines for group in self.groups)


def place_overall(run_label: str, key: KeyTuple, device: str, device_model: str, overall: Overall,
                  groups: list[OverallGroup]) -> OverallPlacement:
    """``overall`` (complete: every category's figures) among ``groups`` (the shared groups of
    ``key``, the user's own machine and runs already left out)."""
    own = next((g for g in groups if model_key(g.device_model) == model_key(device_model)), None)
    rate, ttft = overall.token_rate, overall.ttft_s
    band = own.band() if own is not None else None
    if own is None or band is None or own.machines < MIN_PEERS or not rate:
        return OverallPlacement(run_label, key, device, device_model, overall, groups, own, TOO_FEW)
    return OverallPlacement(run_label, key, device, device_model, overall, groups, own,
                            band_verdict(rate, *band), percentile_of(rate, own.machine_rates),
                            rate / own.token_rate, ttft / own.ttft_s if ttft else None)
