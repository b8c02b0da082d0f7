"""Issue 29, place yourself without downloading everyone: ``hub aggregate`` writes per key and
device class the machines, percentiles 1-99 and dates (only with >= 10 machines), the same from
bundles as from shards; ``compare --against FILE`` judges normal / below / above offline; the
package ships a table of the published references, marked, with its lower threshold."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest_report import assert_one_line_error
from conftest_share import EPYC_MODEL, H100_MODEL, environment, result, run, write_bundle

from accelbench.compare.bands import MIN_MACHINES, PERCENTILES
from accelbench.compare.peers import ABOVE, BELOW, NORMAL, TOO_FEW, machine_values
from accelbench.sharing.against import compare_against
from accelbench.sharing.bands import BANDS_VERSION, BUILTIN_PUBLISHED, PUBLISHED_MIN_MACHINES, read_table
from accelbench.sharing.sources import load_peers
from accelbench.store.jsonfile import save_record


def _hub(folder: Path, cpu_machines: int = 12, cuda_machines: int = 4) -> Path:
    """``cpu_machines`` EPYC machines of mnist train (two results each, a day apart) and
    ``cuda_machines`` H100s: the CPU band is written, the CUDA one (too few machines) is not."""
    folder.mkdir(parents=True)
    for index in range(cpu_machines):
        records = [replace(run(f"cpu{index:04d}{day}", [result(EPYC_MODEL, 800.0 + 20 * index + day,
                                                               seed=index * 2 + day, device="cpu")],
                               environment("cpu", EPYC_MODEL)),
                           created_at=f"2026-0{day + 1}-1{index % 9}T00:00:00+00:00") for day in range(2)]
        write_bundle(folder / f"cpu{index:03d}.jsonl", records, machine_id=f"{index:016x}")
    for index in range(cuda_machines):
        record = run(f"gpu{index:04d}", [result(H100_MODEL, 40000.0 + index, seed=index)],
                     environment("cuda:0", H100_MODEL))
        write_bundle(folder / f"gpu{index:03d}.jsonl", [record], machine_id=f"{1000 + index:016x}")
    return folder


def test_bands_need_ten_machines_and_read_the_same_from_bundles_and_shards(tmp_path: Path,
                                                                            inline_cli) -> None:
    """Issue 29 (aggregate): one band (the CPU's 12 machines, 24 results), percentiles 1-99 of the
    machines' medians, the date range; none for 4 H100s; bundles and shards give the same table."""
    pytest.importorskip("duckdb")
    bundles = _hub(tmp_path / "bundles")
    done = inline_cli("hub", "aggregate", str(bundles), "-o", str(tmp_path / "bands.json"))
    assert done.returncode == 0, done.stderr
    table = json.loads((tmp_path / "bands.json").read_text())
    (band,) = table["bands"]
    assert table["accelbench_bands"] == BANDS_VERSION == 2 and table["min_machines"] == MIN_MACHINES == 10
    assert band["device_class"] == "cpu" and band["machines"] == 12 and band["results"] == 24
    assert (band["first_date"], band["last_date"]) == ("2026-01-10", "2026-02-18")
    cpu = [p for p in load_peers([str(bundles)], print).peers if p.device_kind == "cpu"]
    medians = machine_values(cpu)
    assert len(medians) == 12
    assert band["percentiles"] == pytest.approx(list(np.percentile(medians, PERCENTILES)))
    assert band["key"]["workload"] == "mnist" and band["key"]["mode"] == "train"
    shards = tmp_path / "shards"
    assert inline_cli("hub", "compact", str(bundles), "-o", str(shards), "--workers", "1").returncode == 0
    again = inline_cli("hub", "aggregate", str(shards), "-o", str(tmp_path / "from-shards.json"))
    assert again.returncode == 0, again.stderr
    (sql,) = json.loads((tmp_path / "from-shards.json").read_text())["bands"]
    assert sql["percentiles"] == pytest.approx(band["percentiles"], rel=1e-12)  # float summation order
    assert {**sql, "percentiles": None} == {**band, "percentiles": None}
    assert read_table(str(tmp_path / "bands.json"))[0].machines == 12


@pytest.mark.parametrize(("speed", "verdict"), [(500.0, BELOW), (910.0, NORMAL), (2000.0, ABOVE)])
def test_compare_against_a_table_judges_offline(tmp_path: Path, inline_cli, speed: float,
                                                verdict: str) -> None:
    """Issue 29 (aggregate): a result placed in its key's and device class's band: inside the
    10th-90th percentile normal, else below or above; nothing else is read."""
    assert inline_cli("hub", "aggregate", str(_hub(tmp_path / "bundles")), "-o",
                      str(tmp_path / "bands.json")).returncode == 0
    mine = run("mine0001", [result(EPYC_MODEL, speed, seed=77, device="cpu")], environment("cpu", EPYC_MODEL))
    (comparison,) = compare_against([("mine", mine)], [str(tmp_path / "bands.json")], print)[0]
    placement = comparison.placement
    assert placement.verdict == verdict and placement.own is not None and placement.own.machines == 12
    assert "aggregate band over every cpu device model" in placement.note
    save_record(mine, tmp_path / "mine.json")
    shown = inline_cli("compare", str(tmp_path / "mine.json"), "--against", str(tmp_path / "bands.json"))
    assert shown.returncode == 0, shown.stderr
    assert "all cpu devices (aggregate)" in shown.stdout and "aggregate table(s), offline" in shown.stdout
    # Issue 36: the band's count includes this machine where it shared; the footnotes say so
    # rather than that its own results are never its peers.
    assert "this one too where it did" in placement.note
    words = " ".join(shown.stdout.split())
    assert "this one too where it did" in words and "an aggregate band's counts excepted" in words


def test_a_newer_or_foreign_table_is_one_line(tmp_path: Path, inline_cli) -> None:
    """Issue 29 (aggregate): a table of a newer format is refused, as every file accelbench reads."""
    mine = save_record(run("m1", [result(EPYC_MODEL, 900.0, device="cpu")], environment("cpu", EPYC_MODEL)),
                       tmp_path / "mine.json")
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"accelbench_bands": 99, "bands": []}))
    assert_one_line_error(inline_cli("compare", str(mine), "--against", str(newer)), "version 99", "upgrade")
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"accelbench_bands": 1, "bands": [{"key": {}, "device_class": "gpu",
                                                                    "percentiles": list(PERCENTILES)}]}))
    assert_one_line_error(inline_cli("compare", str(mine), "--against", str(broken)), "device_class")


def test_the_shipped_table_holds_the_published_rows_marked(tmp_path: Path, inline_cli) -> None:
    """Issue 29 (aggregate): the package ships the published references as bands with a lower
    threshold (1 machine, documented), each marked published with its source; a verdict from
    it is "too few peers", with the published band shown."""
    done = inline_cli("hub", "aggregate", "--published", "-o", str(tmp_path / "published.json"))
    assert done.returncode == 0, done.stderr
    table = json.loads((tmp_path / "published.json").read_text())
    assert table["min_machines"] == PUBLISHED_MIN_MACHINES == 1 and table["published"]
    assert table["bands"] and all(band["published"] and band["machines"] < MIN_MACHINES
                                  for band in table["bands"])
    classes = {(band["key"]["workload"], band["device_class"]) for band in table["bands"]}
    assert {("mnist", "cpu"), ("mnist", "mps"), ("mnist", "cuda"), ("simclr-resnet18", "cuda")} <= classes
    mnist_mps = next(b for b in table["bands"]
                     if b["key"]["workload"] == "mnist" and b["device_class"] == "mps")
    assert mnist_mps["percentiles"][49] == pytest.approx(60000 / 19.6, rel=1e-6)  # the M1's epoch
    # What the package ships is that table (read without torch or the workloads).
    assert read_table(BUILTIN_PUBLISHED) == read_table(str(tmp_path / "published.json"))
    mine = run("pub", [result("Apple M1 GPU (MPS)", 3000.0, data="real", device="mps")],
               environment("mps", "Apple M1 GPU (MPS)"))
    (comparison,) = compare_against([("pub", mine)], [BUILTIN_PUBLISHED], print)[0]
    assert comparison.placement.verdict == TOO_FEW and comparison.placement.own is not None
    assert comparison.placement.own.published and "below the 10-machine rule" in comparison.placement.note
