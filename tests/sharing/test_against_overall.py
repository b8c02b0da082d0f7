"""Issue 33, one truth for each protocol's figure: ``compare mine.json --against SOURCE`` places a
run's stored figures across cases (MLPerf Client's overall geometric means) among the overall
figures the shared runs of the same work carry (``Collection.overall``'s groups), by the rule and
in the words a case is placed with (percentile among the machines of its device model, ratio to
their median, normal / below / above / too few peers), in its table and its ``--json``; never
among this machine's own runs, nor its own run shared under another machine id; the same from
Parquet shards as from bundles. A real run (subprocess); the peers' bundles are written by the real
``share`` code from that run's record with planted stored figures (a surface that recomputed them
from the categories would place a different figure)."""

from __future__ import annotations

import json
import shutil
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest_overall import planted_copy, real_mlperf_run
from conftest_report import cpu_and_cuda

from accelbench.results import RunRecord
from accelbench.sharing.against import place_among
from accelbench.sharing.build import build_bundle
from accelbench.sharing.signing import can_sign

#: The peers' stored 2nd+ token rates and TTFTs, a machine each.
RATES = (100.0, 110.0, 120.0, 130.0, 140.0, 150.0)
TTFTS = (0.05, 0.06, 0.07, 0.08, 0.09, 0.10)
#: Yours: below the peers' 10th percentile (105), 1 of 6 machines slower.
MINE = {"mlperf_ttft_geomean_s": 0.0777, "mlperf_token_rate_geomean": 101.0}


def _load(path: Path) -> RunRecord:
    return RunRecord.from_dict(json.loads(path.read_text()))


def _peers(record: RunRecord, folder: Path, count: int = len(RATES)) -> Path:
    """A bundle per machine of ``record``'s work (a run of its own each), its stored figures planted."""
    folder.mkdir()
    (group,) = record.protocol_overall or []
    for index, (rate, ttft) in enumerate(zip(RATES[:count], TTFTS[:count], strict=True)):
        peer = replace(record, run_id=f"peer-{index}", protocol_overall=[
            replace(group, mlperf_token_rate_geomean=rate, mlperf_ttft_geomean_s=ttft)])
        (folder / f"m{index}.jsonl").write_text(build_bundle([peer], f"{index + 1:032x}").text())
    return folder


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(your file, a folder of six machines' bundles of the same work)."""
    folder = tmp_path_factory.mktemp("mlperf")
    run = real_mlperf_run(folder)
    return planted_copy(run, folder / "mine.json", MINE), _peers(_load(run), folder / "peers")


def _overall(cli: Any, mine: Path, source: Path) -> dict[str, Any]:
    done = cli("compare", str(mine), "--against", str(source), "--json")
    assert done.returncode == 0, done.stderr
    (placed,) = json.loads(done.stdout)["against"]["overall"]
    return dict(placed)


def test_your_stored_overall_figures_are_placed_among_the_shared_runs(cli, shared: tuple[Path, Path]) -> None:
    mine, peers = shared
    placed = _overall(cli, mine, peers)
    low, high = (float(v) for v in np.percentile(RATES, [10, 90]))
    assert (placed["mlperf_ttft_geomean_s"], placed["mlperf_token_rate_geomean"]) == (0.0777, 101.0)
    assert placed["verdict"] == "below its peers" and (placed["peers"], placed["machines"]) == (6, 6)
    assert placed["percentile"] == pytest.approx(100 / 6)  # one machine of six below yours
    assert placed["ratio_to_median"] == pytest.approx(101.0 / statistics.median(RATES))
    assert placed["ttft_ratio_to_median"] == pytest.approx(0.0777 / statistics.median(TTFTS))
    assert placed["key"]["protocol"] == "mlperf-client" and placed["key"]["prompt_len"] == 0
    own = placed["own_model"]
    assert own == {"device_model": placed["device_model"], "runs": 6, "machines": 6,
                   "categories": len(placed["categories"]),
                   "mlperf_ttft_geomean_s": pytest.approx(statistics.median(TTFTS)),
                   "mlperf_token_rate_geomean": statistics.median(RATES),
                   "low": pytest.approx(low), "high": pytest.approx(high)}
    assert placed["models"] == [own]
    # The table says the same, in the words a case's placement uses.
    done = cli("compare", str(mine), "--against", str(peers))
    assert done.returncode == 0, done.stderr
    rows = [" ".join(line.split()) for line in done.stdout.splitlines()]
    flat = " ".join(rows)
    assert (f"gpt2 · generate · fp32 tiny protocol:mlperf-client batch 1 on {placed['device_model']} (cpu, "
            "mine.json): MLPerf Client overall, over 5 categories, against 6 shared run(s) from 6 "
            "machine(s)") in flat
    start = rows.index("device model runs median TTFT median/s p10–p90 your TTFT you/s pct x median verdict")
    assert rows[start + 2] == f"{placed['device_model']} 6 75.0 ms 125 105–145 77.7 ms 101 17 0.81x below"
    assert "overall verdict: your run's stored 2nd+ token rate" in flat


def test_your_own_runs_are_never_your_peers(cli, shared: tuple[Path, Path], tmp_path: Path) -> None:
    """This machine's shared bundle (its id) and your run shared under another machine id (the same
    group id; its lines the same content) count neither as overall peers nor as case peers."""
    mine, peers = shared
    source = tmp_path / "source"
    shutil.copytree(peers, source)
    assert cli("share", str(mine), "-o", str(source / "mine.jsonl"), "--quiet").returncode == 0
    (source / "elsewhere.jsonl").write_text(build_bundle([_load(mine)], "f" * 32).text())
    done = cli("compare", str(mine), "--against", str(source), "--json")
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)["against"]
    (placed,) = view["overall"]
    assert (placed["peers"], placed["machines"], placed["percentile"]) == (6, 6, pytest.approx(100 / 6))
    assert all(case["peers"] == 6 for case in view["placements"]), [c["peers"] for c in view["placements"]]


def test_too_few_machines_are_said_not_judged(cli, shared: tuple[Path, Path], tmp_path: Path) -> None:
    mine, _ = shared
    few = _peers(_load(mine), tmp_path / "few", count=3)
    placed = _overall(cli, mine, few)
    assert placed["verdict"] == "too few peers" and placed["machines"] == 3
    assert placed["percentile"] is None and placed["ratio_to_median"] is None
    text = " ".join(cli("compare", str(mine), "--against", str(few)).stdout.split())
    assert ("too few peers: 3 machine(s) of this device model shared overall figures of the same work; "
            "5 are needed to judge") in text


@pytest.mark.skipif(not can_sign(), reason="hub compact verifies signatures: cryptography")
def test_shards_place_it_as_bundles_do(cli, shared: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    mine, peers = shared
    shards = tmp_path / "shards"
    done = cli("hub", "compact", str(peers), "-o", str(shards), "--workers", "1", "--quiet")
    assert done.returncode == 0, done.stderr
    assert _overall(cli, mine, shards) == _overall(cli, mine, peers)


def test_a_run_without_figures_across_cases_places_none(shared: tuple[Path, Path]) -> None:
    placed = place_among([("plain", cpu_and_cuda("plain"))], [str(shared[1])], lambda message: None)
    assert placed.comparisons and placed.overall == []
