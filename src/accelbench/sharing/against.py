"""The user's runs against shared results: ``compare --against`` and ``run --against``.

The user's cases become peers through the very line ``share`` would write (so a result the user
already shared is recognised by its content hash and not counted as its own peer), carrying this
install's machine id, so that no result this machine shared is counted as its peer; the sources
are read for those keys only; the published references join as peers of the same shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.compare.peers import PeerComparison, PeerResult, place, published_peers
from accelbench.results import CaseResult, RunRecord
from accelbench.sharing.build import SHARED_KINDS, SelftestLookup, case_line
from accelbench.sharing.bundle import BadLine, dump_line, parse_line
from accelbench.sharing.machine_id import stored_machine_id
from accelbench.sharing.peer_view import peer_of
from accelbench.sharing.sources import Loaded, Warn, load_peers


def own_peers(record: RunRecord, selftest: SelftestLookup | None = None,
              machine: str = "") -> list[tuple[CaseResult, PeerResult]]:
    """Each finished timing case of ``record`` with its peer view. Not scrubbed: the line never
    leaves this machine, and a redacted name could match nothing."""
    if record.kind not in SHARED_KINDS:
        return []
    out = []
    for case in record.cases:
        if not case.ok or case.skipped or not case.throughput():
            continue
        line = case_line(record, case, machine, selftest(case.device) if selftest else None)
        try:
            peer = peer_of(parse_line(dump_line(line)))
        except BadLine:  # a name no reader accepts (hostile or over-long): nothing to match
            continue
        if peer is not None:
            out.append((case, peer))
    return out


def compare_against(runs: Sequence[tuple[str, RunRecord]], sources: Sequence[str], warn: Warn,
                    selftest: SelftestLookup | None = None) -> tuple[list[PeerComparison], Loaded]:
    """Every finished timing case of ``runs`` (label, record) placed among the sources' results."""
    machine = stored_machine_id() or ""
    mine = [(label, case, peer) for label, record in runs
            for case, peer in own_peers(record, selftest, machine)]
    loaded = load_peers(sources, warn, keys={peer.key for _, _, peer in mine},
                        settings_for={peer.model_key for _, _, peer in mine})
    by_key: dict[tuple[object, ...], list[PeerResult]] = {}
    for peer in loaded.peers:
        by_key.setdefault(peer.key, []).append(peer)
    comparisons = []
    for label, case, peer in mine:
        published = published_peers(case.workload, case.mode, case.dataset_size)
        comparisons.append(PeerComparison(label, case.device,
                                          place(peer, by_key.get(peer.key, []) + published)))
    return comparisons, loaded
