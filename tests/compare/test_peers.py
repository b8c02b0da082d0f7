"""Is my machine normal? The user's result among shared results of the same work (real bundles
written by the share code, read back by the real loader), with planted outliers whose reason is a
recorded setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest_share import CPU_FLAGS, TF32_OFF, environment, result, run, write_bundle, write_peer_bundles
from rich.console import Console

from accelbench.compare.peers import ABOVE, BELOW, NORMAL, TOO_FEW, PeerResult, place
from accelbench.render.peers_table import peers_renderable
from accelbench.sharing.against import compare_against, own_peers

H100, M2, EPYC, RTX = ("NVIDIA H100 80GB HBM3", "Apple M2 GPU (MPS)", "AMD EPYC 7763 64-Core Processor",
                       "NVIDIA GeForce RTX 4090")


@pytest.fixture(scope="module")
def peers_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_peer_bundles(tmp_path_factory.mktemp("peers") / "bundles")


def _place(record, folder: Path):
    warnings: list[str] = []
    comparisons, loaded = compare_against([("mine", record)], [str(folder)], warnings.append)
    assert warnings == []
    assert len(comparisons) == 1
    return comparisons[0].placement, loaded


def test_a_normal_result_is_normal_with_its_percentile_and_ratio(peers_folder: Path) -> None:
    mine = run("me1", [result(H100, 40500.0, seed=99)], environment("cuda:0", H100, hostname="mine"))
    placement, loaded = _place(mine, peers_folder)
    assert loaded.lines == 33 and len(loaded.peers) == 33
    assert placement.verdict == NORMAL and placement.reasons == []
    assert placement.own is not None and placement.own.count == 12 and placement.own.machines == 12
    assert 0.95 < placement.ratio_to_median < 1.1 and 20 < placement.percentile < 90
    # Every device model that did the same work is a group: the M2, the EPYC, the 4090 too.
    assert {g.device_model for g in placement.groups} >= {H100, M2, EPYC, RTX}


def test_tf32_off_is_below_its_peers_and_named_as_the_reason(peers_folder: Path) -> None:
    """An H100 at 52 where its peers measure 404 (TF32 off vs on): the verdict says why."""
    slow = result(H100, 40000.0 * 0.13, seed=5, flags=TF32_OFF)
    placement, _ = _place(run("me2", [slow], environment("cuda:0", H100, hostname="mine")), peers_folder)
    assert placement.verdict == BELOW
    assert placement.reasons[0].startswith("TF32 (matmul) off; peers: on (10 of 12)")
    # The two peers that also ran with TF32 off measured what the user measured.
    assert "the 2 with off: 0.1" in placement.reasons[0]


def test_low_power_mode_on_a_mac_is_named(peers_folder: Path) -> None:
    power = {"power_source": {"value": "battery (40%)"}, "load_per_cpu": {"value": 0.1},
             "macos_power_mode": {"value": {"lowpowermode": "1"}}}
    mine = run("me3", [result(M2, 1500.0)], environment("mps", M2, hostname="mine", power=power))
    placement, _ = _place(mine, peers_folder)
    assert placement.verdict == BELOW
    reasons = " | ".join(placement.reasons)
    assert "macOS power mode lowpowermode=1; peers: lowpowermode=0 (8 of 8)" in reasons
    assert "power source battery (40%); peers: AC" in reasons


def test_fewer_threads_is_named(peers_folder: Path) -> None:
    mine = run("me4", [result(EPYC, 200.0, threads=8)], environment("cpu", EPYC, hostname="mine"))
    placement, _ = _place(mine, peers_folder)
    assert placement.verdict == BELOW and placement.percentile == 0
    assert any(r.startswith("threads 8; peers: 64 (10 of 10)") for r in placement.reasons)


def test_above_its_peers_and_too_few_peers(peers_folder: Path) -> None:
    fast = run("me5", [result(EPYC, 2000.0)], environment("cpu", EPYC, hostname="mine"))
    placement, _ = _place(fast, peers_folder)
    assert placement.verdict == ABOVE and placement.ratio_to_median > 2
    assert placement.reasons == []  # nothing recorded differs: said as such, not guessed
    few = run("me6", [result(RTX, 1000.0)], environment("cuda:0", RTX, hostname="mine"))
    placement, _ = _place(few, peers_folder)
    assert placement.verdict == TOO_FEW and placement.percentile is None and placement.own.count == 3


def test_only_the_same_work_counts_and_my_own_shared_result_is_not_my_peer(tmp_path: Path,
                                                                         peers_folder: Path) -> None:
    mine = run("me7", [result(EPYC, 880.0)], environment("cpu", EPYC, hostname="mine"))
    other_batch = run("o1", [result(EPYC, 100.0, batch=128, seed=i) for i in range(6)],
                      environment("cpu", EPYC))
    write_bundle(tmp_path / "b128.jsonl", [other_batch])
    write_bundle(tmp_path / "mine.jsonl", [mine])  # the user shared this very result before
    comparisons, loaded = compare_against([("me7", mine)], [str(peers_folder), str(tmp_path)], print)
    placement = comparisons[0].placement
    assert placement.own.count == 10  # neither batch 128 nor the user's own line
    assert len(loaded.peers) == 34  # the 33 peers and the user's own shared line (same key)


def test_published_references_take_part_marked_with_their_source() -> None:
    """A CPU run of the published mnist configuration (real data, batch 64) meets the published
    M1 and P100 epoch times as peers of the same shape."""
    mine = run("pub", [result(EPYC, 1500.0, data="real", size="published")], environment("cpu", EPYC))
    comparisons, _ = compare_against([("pub", mine)], [], print)
    groups = {g.device_model: g for g in comparisons[0].placement.groups}
    m1 = groups["Apple M1 (MPS)"]
    assert m1.published.startswith("blog post") and abs(m1.median - 60000 / 19.6) < 1
    assert "CPU of Apple M1 (MPS)" in groups and comparisons[0].placement.verdict == TOO_FEW
    # Synthetic data is different work: no published peer.
    synthetic = run("syn", [result(EPYC, 1500.0)], environment("cpu", EPYC))
    assert compare_against([("syn", synthetic)], [], print)[0][0].placement.groups == []


def test_the_peers_table_at_100_columns(peers_folder: Path) -> None:
    slow = run("me8", [result(H100, 5200.0, flags=TF32_OFF), result(EPYC, 900.0, flags=CPU_FLAGS)],
               environment("cuda:0", H100, hostname="mine"))
    comparisons, _ = compare_against([("me8", slow)], [str(peers_folder)], print)
    console = Console(width=100, record=True)
    console.print(peers_renderable(comparisons))
    text = console.export_text()
    lines = text.splitlines()
    assert all(len(line.rstrip()) <= 100 for line in lines)
    assert "below¹" in text and "¹ below its peers; likely reasons: TF32 (matmul) off" in text
    assert text.count("verdict: among results of the same work") == 1  # the rule, once
    for word in ("results", "median/s", "verdict", H100.split()[0]):
        assert any(word in line for line in lines), word


def test_place_ignores_other_keys_and_nonpositive_figures() -> None:
    key = ("w", 1, "train", 64, "fp32", "", False, "synthetic", "published")
    mine = PeerResult(key, "cpu", "X", 100.0)
    peers = [PeerResult(key, "cpu", "x ", 98.0 + i) for i in range(5)]
    peers += [PeerResult(key[:3] + (128,) + key[4:], "cpu", "X", 1.0), PeerResult(key, "cpu", "X", 0.0)]
    placement = place(mine, peers)
    assert placement.verdict == NORMAL and placement.own.count == 5  # "x " groups with "X"


def test_own_peers_are_the_lines_share_would_write() -> None:
    record = run("own", [result(EPYC, 900.0), result(EPYC, 1.0, status="oom", step_times=[])],
                 environment("cpu", EPYC))
    pairs = own_peers(record)
    assert len(pairs) == 1 and pairs[0][1].settings["threads"] == "64"
    assert abs(pairs[0][1].throughput - 900.0) / 900 < 0.02
