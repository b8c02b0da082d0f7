"""Issue 33, one truth for each protocol's figure: ``share`` carries a run's figures across cases
(MLPerf Client's overall geometric means, as the record stores them) on each line of their group,
in an optional ``overall`` section: the content hash and a signature cover it, a reader counts the
group once, and a line without a readable section is read as before. Bundles are written by the
real ``share`` code (and signed by the real signer) and read by the real loader; the stored
figures are planted ones no category could give, so a reader that recomputed them would fail."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_history_overall import PLANTED, planted

from accelbench.compare.collection import collect
from accelbench.results.protocol_summary import mlperf_client_overall, overall_key
from accelbench.sharing.build import build_bundle
from accelbench.sharing.bundle import HASH_MISMATCH, BadLine, dump_line, parse_line
from accelbench.sharing.peer_view import peer_of
from accelbench.sharing.signing import BAD_SIGNATURE, Signer, can_sign
from accelbench.sharing.sources import load_peers, parse_result


def _mlperf(lines: list[str]) -> list[dict[str, Any]]:
    parsed = [parse_line(text) for text in lines]
    return [line for line in parsed if line["key"]["protocol"] == "mlperf-client"]


def test_each_line_of_the_group_carries_the_stored_figures() -> None:
    record = planted()
    (stored,) = record.protocol_overall or []
    bundle = build_bundle([record], "a" * 32)
    lines = [parse_line(text) for text in bundle.lines]
    mlperf = _mlperf(bundle.lines)
    assert len(mlperf) == len(stored.categories) and len(lines) > len(mlperf)
    assert all("overall" not in line for line in lines if line not in mlperf)
    sections = [line["overall"] for line in mlperf]
    assert all(section == sections[0] for section in sections)  # one group, whole on every line
    section = sections[0]
    assert {name: section[name] for name in stored.to_dict()} == stored.to_dict()
    assert (section["mlperf_ttft_geomean_s"], section["mlperf_token_rate_geomean"]) == (
        PLANTED["mlperf_ttft_geomean_s"], PLANTED["mlperf_token_rate_geomean"])
    assert re.fullmatch(r"[0-9a-f]{16}", section["group_id"]) and record.run_id not in json.dumps(section)
    carried = {peer.overall for peer in map(peer_of, mlperf) if peer is not None}
    (overall,) = carried  # every line's, one group
    assert overall is not None and (overall.ttft_s, overall.token_rate, overall.categories) == (
        0.0777, 12345.6, len(stored.categories))


def test_two_runs_of_one_group_are_two_groups() -> None:
    """The group id names the run's group: the same work run twice is two groups, counted apart."""
    first, second = (_mlperf(build_bundle([planted(run_id)], "a" * 32).lines)[0]["overall"]["group_id"]
                     for run_id in ("run-a", "run-b"))
    assert first != second


@pytest.mark.skipif(not can_sign(), reason="signing needs cryptography (the hub extra)")
def test_signed_lines_carry_the_section_and_still_verify() -> None:
    signer = Signer.generate()
    signed = [signer.sign_line(text) for text in build_bundle([planted()], signer.machine_id).lines]
    read = [parse_result(text.encode("utf-8")) for text in signed]  # verifies every signature
    carried = [peer.overall for peer, _ in read if peer is not None and peer.overall is not None]
    assert carried and all(o.token_rate == PLANTED["mlperf_token_rate_geomean"] for o in carried)
    text = next(t for t in signed if '"overall"' in t)
    changed = json.loads(text)
    changed["overall"]["mlperf_token_rate_geomean"] = 99999.0
    with pytest.raises(BadLine) as mismatch:  # the figure changed, the hash kept
        parse_result(json.dumps(changed).encode("utf-8"))
    assert mismatch.value.reason == HASH_MISMATCH
    rehashed = dump_line({name: value for name, value in changed.items() if name not in ("bundle", "hash")})
    with pytest.raises(BadLine) as forged:  # hashed again: the signature is over the old hash
        parse_result(rehashed.encode("utf-8"))
    assert forged.value.reason == BAD_SIGNATURE


#: Ways a section can be unreadable (or incomplete): each leaves the line a peer without it.
BROKEN: dict[str, Callable[[dict[str, Any]], Any]] = {
    "not an object": lambda section: "not an object",
    "no group id": lambda section: {**section, "group_id": ""},
    "figure as text": lambda section: {**section, "mlperf_token_rate_geomean": "fast"},
    "no figures": lambda section: {k: v for k, v in section.items() if not k.startswith("mlperf_")},
    "a category missing": lambda section: {**section, "missing": ["summarization"]},
    "no categories": lambda section: {**section, "categories": []},
}


@pytest.mark.parametrize("how", sorted(BROKEN))
def test_a_line_whose_section_cannot_be_read_is_a_peer_without_it(how: str) -> None:
    """Lenient: the section is optional, so a line without a readable one is read as a line
    written before it (its rate, key and settings as they were), carrying no figures across cases."""
    line = _mlperf(build_bundle([planted()], "a" * 32).lines)[0]
    broken = BROKEN[how](line["overall"])
    text = dump_line({**{k: v for k, v in line.items() if k not in ("bundle", "hash")}, "overall": broken})
    before, after = peer_of(line), peer_of(parse_line(text))
    assert before is not None and before.overall is not None and after is not None
    assert after.overall is None
    assert replace(after, content_hash="") == replace(before, content_hash="", overall=None)


def test_the_collection_counts_each_group_once_and_reads_the_stored_figures(tmp_path: Path) -> None:
    """Two machines (one with two runs): each group once however many lines carry it; a device
    model's figures are the median over machines of each machine's median group, all stored ones."""
    fast = planted("run-a")
    slow = planted("run-b")
    (group,) = slow.protocol_overall or []
    slow.protocol_overall = [replace(group, mlperf_ttft_geomean_s=0.2, mlperf_token_rate_geomean=1000.0)]
    third = planted("run-c")
    third.protocol_overall = [replace(group, mlperf_ttft_geomean_s=0.3, mlperf_token_rate_geomean=3000.0)]
    (tmp_path / "a.jsonl").write_text(build_bundle([fast], "a" * 32).text())
    (tmp_path / "b.jsonl").write_text(build_bundle([slow, third], "b" * 32).text())
    loaded = load_peers([str(tmp_path)], lambda message: None)
    collection = collect(loaded.peers)
    key = overall_key(next(p.key for p in loaded.peers if p.overall is not None))
    (summary,) = collection.overall[key]
    assert (summary.groups, summary.machines, summary.categories) == (3, 2, len(group.categories))
    # machine b: median(0.2, 0.3) = 0.25 s, median(1000, 3000) = 2000; then the two machines' median
    assert summary.ttft_s == pytest.approx((0.0777 + 0.25) / 2)
    assert summary.token_rate == pytest.approx((12345.6 + 2000.0) / 2)
    assert summary.token_rate != pytest.approx(mlperf_client_overall(fast.cases)[0].token_rate or 0)
