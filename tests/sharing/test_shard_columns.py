"""The shard path applies what the bundle path applies (issues 33 and 34).

Issue 33, "an honest diagnosis on every generation row": Parquet shards carry a generation line's
decode diagnosis (bound, host CPU, bound class, recipe, floor ratio: ``sharing/shards.py`` version
2), so a placement from shards sets aside an overhead-bound line driven by another host CPU model
exactly as a placement from bundles does, the site built from shards pools overhead-bound results
per host CPU and names their recipe and bound, and ``hub aggregate`` bands (from bundles or shards)
are split the same way; a version-1 shard (no decode columns) still reads, its rows not judged.

Issue 34, "one count": a conflict compacted into the shards is counted once, the same in the
peers table's summary, ``--json``'s ``read``, ``site`` and ``hub compact``.

Real components throughout: bundles written by the real ``share`` code from a real H100 result
(tests/data/decode_bound, the record test_decode_bound_surfaces.py reads), compacted by the real
``hub compact``, read through DuckDB."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest
from conftest_share import EPYC_MODEL, environment, result, run, write_bundle
from test_decode_bound_surfaces import EPYC, XEON, _from_host, _h100

from accelbench.compare.decode_diagnosis import OVERHEAD
from accelbench.compare.outliers import CONFLICT
from accelbench.render.site import render_site
from accelbench.sharing.against import compare_against
from accelbench.sharing.build import build_bundle
from accelbench.sharing.query import read_collection
from accelbench.sharing.shards import COLUMNS, DECODE_COLUMNS, SHARD_VERSION, duckdb_connection, shard_files
from accelbench.store.jsonfile import save_record

pytest.importorskip("duckdb")
pytest.importorskip("cryptography")  # hub compact verifies signatures

M2 = "Apple M2 Max"
ASIDE = "overhead-bound decode (host launches) driven by another host CPU: {} against {}"


def _quiet(message: str) -> None:
    """Warnings are not what these tests judge."""


def _hub(folder: Path, hosts: dict[str, int]) -> Path:
    """Bundles of the H100 result as measured from ``hosts`` (host CPU -> machines), one machine
    (and id) a bundle."""
    folder.mkdir(parents=True)
    index = 0
    for cpu, machines in hosts.items():
        for _ in range(machines):
            record = _h100(f"peer{index:04d}") if cpu == XEON else _from_host(cpu, f"peer{index:04d}")
            (folder / f"{index:04d}.jsonl").write_text(build_bundle([record], f"{index + 1:032x}").text())
            index += 1
    return folder


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Ten machines whose overhead-bound int4 decode was driven by the H100's host CPU, ten by
    another; their bundles, and the same compacted into shards by the real hub compact."""
    root = tmp_path_factory.mktemp("shard-columns")
    bundles = _hub(root / "bundles", {XEON: 10, EPYC: 10})
    from accelbench.hub.compact import compact

    report = compact([str(bundles)], root / "shards", _quiet, workers=1)
    assert report.rows == 40 and not report.refused
    return {"bundles": bundles, "shards": root / "shards"}


def _placements(sources: list[Path]) -> dict[str, Any]:
    comparisons, _ = compare_against([("mine", _h100("mine0001"))], [str(s) for s in sources], _quiet)
    return {c.placement.mine.key[4]: c.placement for c in comparisons}  # by precision


def test_a_shard_row_carries_the_diagnosis_as_the_line_does(hub: dict[str, Path]) -> None:
    connection = duckdb_connection("test")
    files = [str(f) for f in shard_files(hub["shards"])]
    rows = connection.execute(
        "SELECT DISTINCT shard_version, precision, decode_bound, host_cpu, decode_class, decode_recipe, "
        f"round(decode_floor_ratio) FROM read_parquet({files}) ORDER BY ALL").fetchall()
    recipe = "inductor:reduce-overhead, CUDA graphs captured"
    assert rows == [(SHARD_VERSION, "bf16", "bandwidth", EPYC, "bandwidth", recipe, 2.0),
                    (SHARD_VERSION, "bf16", "bandwidth", XEON, "bandwidth", recipe, 2.0),
                    (SHARD_VERSION, "int4-wo", OVERHEAD, EPYC, f"overhead:{EPYC.casefold()}", recipe, 4.0),
                    (SHARD_VERSION, "int4-wo", OVERHEAD, XEON, f"overhead:{XEON.casefold()}", recipe, 4.0)]


def test_placement_from_shards_sets_another_host_aside_as_from_bundles(hub: dict[str, Path]) -> None:
    """The overhead-bound int4 line is compared only with the ten lines of its host CPU model, the
    ten of the other host set aside and said; the bandwidth-bound bf16 line with all twenty."""
    from_bundles, from_shards = _placements([hub["bundles"]]), _placements([hub["shards"]])
    for placements in (from_bundles, from_shards):
        int4, bf16 = placements["int4-wo"], placements["bf16"]
        assert (int4.set_aside, int4.machine_count, int4.verdict) == (10, 10, "normal")
        assert int4.set_aside_reasons == [ASIDE.format(EPYC, XEON)]
        assert (bf16.set_aside, bf16.machine_count) == (0, 20)
    for precision in ("int4-wo", "bf16"):
        a, b = from_bundles[precision], from_shards[precision]
        assert (a.set_aside, a.set_aside_reasons, a.verdict, a.machine_count, a.peer_count) == \
               (b.set_aside, b.set_aside_reasons, b.verdict, b.machine_count, b.peer_count)
        assert b.own is not None and a.own is not None and b.own.median == pytest.approx(a.own.median)


def test_the_cli_says_what_was_set_aside_from_shards(hub: dict[str, Path], tmp_path: Path,
                                                     inline_cli) -> None:
    mine = save_record(_h100("mine0001"), tmp_path / "mine.json")
    shown = inline_cli("compare", str(mine), "--against", str(hub["shards"]), "--json")
    assert shown.returncode == 0, shown.stderr
    placed = json.loads(shown.stdout)["against"]["placements"]
    assert [(p["key"]["precision"], p["set_aside"], p["machines"]) for p in placed] == [("bf16", 0, 20),
                                                                                      ("int4-wo", 10, 10)]
    table = inline_cli("compare", str(mine), "--against", str(hub["shards"]))
    assert "10 result(s) of this work set aside, not comparable: " + ASIDE.format(EPYC, XEON) in \
           " ".join(table.stdout.split())


def test_the_site_from_shards_pools_overhead_bound_results_per_host(hub: dict[str, Path]) -> None:
    """The site's summary from shards is the one from bundles: the int4 work has a row per host CPU
    model, named with its recipe and bound."""
    from_bundles, _ = read_collection([str(hub["bundles"])], _quiet)
    from_shards, _ = read_collection([str(hub["shards"])], _quiet)
    assert from_bundles.keys.keys() == from_shards.keys.keys()
    for key, summary in from_bundles.keys.items():
        def shown(groups: list[Any]) -> list[tuple[Any, ...]]:
            return sorted((g.device_model, g.count, g.machines, g.recipe, g.decode) for g in groups)

        assert shown(summary.groups) == shown(from_shards.keys[key].groups)
    pages = {name: html.unescape(page) for name, page in render_site(from_shards).items()}
    int4 = next(page for name, page in pages.items() if name.startswith("bench-llama-1b-generate-int4"))
    assert int4.count("NVIDIA H100 80GB HBM3</a>") == 2
    for cpu in (XEON, EPYC):
        assert f"overhead-bound (host launches, {cpu}): median 4x the bandwidth floor" in int4


def test_bands_split_by_bound_class_from_bundles_and_shards(hub: dict[str, Path], tmp_path: Path,
                                                            inline_cli) -> None:
    """hub aggregate bands an overhead-bound work per host CPU model (bundles and shards alike), and
    a placement in a band reads the band of its own bound class."""
    tables = []
    for source in ("bundles", "shards"):
        out = tmp_path / f"{source}.json"
        done = inline_cli("hub", "aggregate", str(hub[source]), "-o", str(out))
        assert done.returncode == 0, done.stderr
        tables.append(json.loads(out.read_text())["bands"])
    for bands in tables:
        assert sorted((b["key"]["precision"], b["decode_class"], b["machines"]) for b in bands) == [
            ("bf16", "bandwidth", 20), ("int4-wo", f"overhead:{EPYC.casefold()}", 10),
            ("int4-wo", f"overhead:{XEON.casefold()}", 10)]
    assert [{**b, "percentiles": None} for b in tables[0]] == [{**b, "percentiles": None} for b in tables[1]]
    placed = _placements([tmp_path / "shards.json"])
    int4 = placed["int4-wo"]
    assert int4.own is not None and int4.own.machines == 10 and int4.verdict == "normal"
    assert f"its results: overhead-bound (host launches, {XEON})" in int4.note


def _old_shards(new: Path, old: Path) -> None:
    """``new``'s shards as version 1 wrote them: without the decode columns (nor version 3's
    ``signed``)."""
    connection = duckdb_connection("test")
    for path in shard_files(new):
        target = old / path.relative_to(new)
        target.parent.mkdir(parents=True, exist_ok=True)
        connection.execute(f"COPY (SELECT * EXCLUDE ({', '.join([*DECODE_COLUMNS, 'signed'])}) "
                           f"REPLACE (1 AS shard_version) FROM read_parquet('{path}')) TO '{target}' "
                           "(FORMAT parquet)")
    columns = {row[0] for row in connection.execute(
        f"DESCRIBE SELECT * FROM read_parquet('{shard_files(old)[0]}')").fetchall()}
    assert columns == set(COLUMNS) - set(DECODE_COLUMNS)


def test_a_version_1_shard_reads_as_not_judged(hub: dict[str, Path], tmp_path: Path) -> None:
    """Its rows are compared as before the rule (nothing set aside, nothing split); a line judged
    in a bundle beside it still is: two machines of a third host CPU are set aside."""
    old = tmp_path / "old"
    _old_shards(hub["shards"], old)
    placed = _placements([old])
    assert (placed["int4-wo"].set_aside, placed["int4-wo"].machine_count) == (0, 20)
    collection, loaded = read_collection([str(old)], _quiet)
    assert loaded.shard_rows == 40
    (int4,) = [s for k, s in collection.keys.items() if k[4] == "int4-wo"]
    assert [(g.machines, g.recipe, g.decode) for g in int4.groups] == [(20, "", "")]
    beside = _hub(tmp_path / "beside", {M2: 2})
    placed = _placements([old, beside])
    assert (placed["int4-wo"].set_aside, placed["int4-wo"].machine_count) == (2, 20)
    assert placed["int4-wo"].set_aside_reasons == [ASIDE.format(M2, XEON)]


# --- issue 34: one count ----------------------------------------------------------------------------
def _conflict_hub(folder: Path) -> Path:
    """Six machines of one CPU model, and a seventh that shared one case twice with other figures."""
    folder.mkdir()
    for index in range(6):
        record = run(f"peer{index:04d}", [result(EPYC_MODEL, 900.0 + 10 * index, seed=index, device="cpu")],
                     environment("cpu", EPYC_MODEL))
        write_bundle(folder / f"{index}.jsonl", [record], machine_id=f"{index + 1:016x}")
    for name, rate in (("a", 905.0), ("b", 1350.0)):
        record = run("twice001", [result(EPYC_MODEL, rate, seed=9, device="cpu")],
                     environment("cpu", EPYC_MODEL))
        write_bundle(folder / f"twice-{name}.jsonl", [record], machine_id="c" * 16)
    return folder


def test_a_conflict_in_the_shards_is_one_count_everywhere(tmp_path: Path, inline_cli) -> None:
    """The two lines in conflict are quarantined; hub compact, the placement, compare --against's
    table and --json, site and hub aggregate all say 2 in conflict, from the shards as from the
    bundles (before, --json's read.conflicts from shards said 0)."""
    bundles = _conflict_hub(tmp_path / "bundles")
    shards = tmp_path / "shards"
    done = inline_cli("hub", "compact", str(bundles), "-o", str(shards), "--workers", "1")
    assert done.returncode == 0, done.stderr
    said = "2 quarantined, kept out of every band (2 in conflict: one machine and case with other figures)"
    assert said in " ".join(done.stderr.split())
    manifest = json.loads((shards / "compacted.json").read_text())
    assert (manifest["outliers"], manifest["conflicts"]) == (2, 2)
    mine = save_record(run("mine0001", [result(EPYC_MODEL, 880.0, seed=42, device="cpu")],
                           environment("cpu", EPYC_MODEL, hostname="me")), tmp_path / "mine.json")
    for source in (bundles, shards):
        shown = inline_cli("compare", str(mine), "--against", str(source), "--json")
        assert shown.returncode == 0, shown.stderr
        against = json.loads(shown.stdout)["against"]
        (placement,) = against["placements"]
        assert placement["outliers"] == 2 and CONFLICT in placement["outlier_reasons"]
        assert (against["read"]["outliers"], against["read"]["conflicts"]) == (2, 2), source
        assert said in against["read"]["summary"]
        table = inline_cli("compare", str(mine), "--against", str(source))
        text = " ".join(table.stdout.split())
        assert said in text and "2 result(s) of this work quarantined and left out" in text
        site = inline_cli("site", str(source), "-o", str(tmp_path / f"site-{source.name}"))
        assert site.returncode == 0 and said in " ".join(site.stderr.split()), site.stderr
        index = (tmp_path / f"site-{source.name}" / "index.html").read_text()
        assert "2 result(s) flagged invalid" in index
        aggregated = inline_cli("hub", "aggregate", str(source), "-o", str(tmp_path / f"{source.name}.json"))
        assert aggregated.returncode == 0 and said in " ".join(aggregated.stderr.split()), aggregated.stderr
