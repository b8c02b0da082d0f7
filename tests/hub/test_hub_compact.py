"""Issue 29, compact and query at scale: ``hub compact`` turns bundles into Parquet shards
(partitioned by mode and device class, hashes verified, duplicates dropped, refused lines listed),
and ``compare --against`` and ``site`` read the shards through DuckDB with the same answers as
from the bundles. Every bundle is written by the real ``share`` code."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest_report import assert_one_line_error
from conftest_share import (
    EPYC_MODEL,
    environment,
    peer_records,
    result,
    run,
    write_bundle,
    write_peer_bundles,
)

from accelbench.compare.collection import collect
from accelbench.compare.outliers import mark_outliers
from accelbench.render.site import render_site
from accelbench.sharing.build import build_bundle
from accelbench.sharing.bundle import dump_line
from accelbench.sharing.query import collection_relation, shard_collection
from accelbench.sharing.shards import REFUSED, duckdb_connection, shard_files
from accelbench.sharing.sources import load_peers
from accelbench.store.jsonfile import save_record

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")


def _mine(tmp_path: Path) -> Path:
    record = run("mine0001", [result(EPYC_MODEL, 300.0, threads=8)],
                 environment("cpu", EPYC_MODEL, hostname="me"))
    return save_record(record, tmp_path / "mine.json")


def _reshared(record_id: str = "ep000001") -> tuple[str, str]:
    """One case shared twice by one machine: before and after a selftest (the validity differs,
    so the content hash differs; the case id is the same)."""
    record = run(record_id, [result(EPYC_MODEL, 950.0, seed=7, device="cpu")], environment("cpu", EPYC_MODEL))
    before = build_bundle([record], "7" * 16).lines[0]
    after = build_bundle([record], "7" * 16, selftest=lambda device: {"passed": True, "date": "2026-01-01",
                                                                       "groups": ["precision"]}).lines[0]
    assert json.loads(before)["hash"] != json.loads(after)["hash"]
    return before, after


def _compact(inline_cli: Any, source: Path, out: Path) -> Any:
    return inline_cli("hub", "compact", str(source), "-o", str(out), "--workers", "1")


@pytest.fixture
def hub(tmp_path: Path) -> Path:
    """A folder hub: the peers' bundles, one bundle twice, one case re-shared, a forged line, a
    stray line and an implausible line."""
    folder = write_peer_bundles(tmp_path / "hub" / "bundles")
    (folder / "zz-copy.jsonl").write_bytes((folder / "machine000.jsonl").read_bytes())
    before, after = _reshared()
    forged = json.loads(before)
    forged["figures"]["samples_per_s"] *= 100
    implausible = json.loads(build_bundle([run("fl000001", [result(EPYC_MODEL, 900.0, seed=3, device="cpu")],
                                               environment("cpu", EPYC_MODEL))], "8" * 16).lines[0])
    implausible["figures"]["achieved_flops"], implausible["limits"]["peak_flops"] = 5e12, 1e12
    implausible = dump_line({k: v for k, v in implausible.items() if k not in ("bundle", "hash")})
    (folder / "extra.jsonl").write_text("\n".join([before, after, json.dumps(forged), "<html>", implausible])
                                        + "\n")
    return tmp_path / "hub"


def test_compact_verifies_drops_duplicates_and_lists_what_it_refused(hub: Path, tmp_path: Path,
                                                                      inline_cli) -> None:
    """Issue 29 (compact): shards by mode and device class; a forged line refused (hash), a whole
    bundle twice and a case re-shared dropped as duplicates, a stray line refused, each with its
    reason in refused.jsonl; the implausible line kept and marked."""
    out = tmp_path / "shards"
    done = inline_cli("hub", "compact", str(hub), "-o", str(out), "--workers", "1")
    assert done.returncode == 0, done.stderr
    partitions = {p.parent.relative_to(out).as_posix() for p in shard_files(out)}
    assert partitions == {"mode=train/device_class=cpu", "mode=train/device_class=cuda",
                          "mode=train/device_class=mps"}
    refused = [json.loads(line) for line in (out / REFUSED).read_text().splitlines()]
    reasons = sorted((Path(r["source"]).name, r["line"], r["reason"]) for r in refused)
    assert reasons == [("extra.jsonl", 2, "duplicate"), ("extra.jsonl", 3, "hash mismatch"),
                       ("extra.jsonl", 4, "not a bundle line"), ("zz-copy.jsonl", 1, "duplicate")]
    messages = {Path(r["source"]).name: r["message"] for r in refused if r["reason"] == "duplicate"}
    assert messages["zz-copy.jsonl"].startswith("same content hash as ") and "machine000.jsonl line 1" in \
        messages["zz-copy.jsonl"]
    assert messages["extra.jsonl"].startswith("same machine, run and case as ") and "extra.jsonl line 1" in \
        messages["extra.jsonl"]
    connection = duckdb_connection("test")
    rows = connection.execute(f"SELECT count(*), count(*) FILTER (implausible <> ''), count(DISTINCT hash) "
                              f"FROM read_parquet('{out}/**/*.parquet')").fetchone()
    assert rows == (35, 1, 35)  # 33 peers, the re-shared case once, the implausible line
    summary = " ".join(done.stderr.split())
    assert "35 result(s)" in summary and "2 duplicate(s) dropped" in summary and "1 implausible" in summary
    # Compacting again into the same folder replaces the shards; shards are no source (derived).
    before = sorted(p.relative_to(out) for p in shard_files(out))
    again = _compact(inline_cli, hub, out)
    assert again.returncode == 0, again.stderr
    assert sorted(p.relative_to(out) for p in shard_files(out)) == before
    assert [json.loads(line) for line in (out / REFUSED).read_text().splitlines()] == refused
    assert_one_line_error(_compact(inline_cli, out, tmp_path / "from-shards"), "derived", "bundles")


def test_compare_and_site_read_the_shards_as_they_read_the_bundles(hub: Path, tmp_path: Path,
                                                                   inline_cli) -> None:
    """Issue 29 (query): compare --against and site give the same figures from the shards as from
    the bundles (the SQL summaries equal the Python ones), and shards plus a bundle submitted
    since the compaction read as one collection."""
    out = tmp_path / "shards"
    assert _compact(inline_cli, hub / "bundles", out).returncode == 0
    mine = str(_mine(tmp_path))
    from_bundles = inline_cli("compare", mine, "--against", str(hub / "bundles"))
    from_shards = inline_cli("compare", mine, "--against", str(out))
    assert from_bundles.returncode == 0 and from_shards.returncode == 0, from_shards.stderr
    def table(text: str) -> str:
        return text.split("\nread ")[0]

    assert table(from_shards.stdout) == table(from_bundles.stdout)
    assert "from 3 Parquet shard(s)" in from_shards.stdout and "below" in from_shards.stdout
    # The site: the same pages from the SQL summary as from the peers.
    peers = mark_outliers(load_peers([str(hub / "bundles")], print).peers)
    connection = duckdb_connection("test")
    files = [str(p) for p in shard_files(out)]
    sql = shard_collection(connection, collection_relation(connection, files, []))
    assert render_site(sql, "now") == render_site(collect(peers), "now")
    site = inline_cli("site", str(out), "-o", str(tmp_path / "site"))
    assert site.returncode == 0, site.stderr and (tmp_path / "site" / "index.html").exists()
    # A bundle submitted after the compaction joins the shards; a line in both counts once.
    late = tmp_path / "late"
    late.mkdir()
    write_bundle(late / "new.jsonl", [run("late0001", [result(EPYC_MODEL, 905.0, seed=99, device="cpu")],
                                          environment("cpu", EPYC_MODEL))], machine_id="9" * 16)
    (late / "old.jsonl").write_bytes((hub / "bundles" / "machine020.jsonl").read_bytes())
    both = inline_cli("compare", mine, "--against", str(out), "--against", str(late))
    assert both.returncode == 0, both.stderr
    assert "against 35 shared result(s) from 35 machine(s)" in " ".join(both.stdout.split())
    assert table(both.stdout) == table(inline_cli("compare", mine, "--against", str(hub / "bundles"),
                                                  "--against", str(late)).stdout)


def test_only_the_partitions_of_the_users_work_are_opened(hub: Path, tmp_path: Path, inline_cli) -> None:
    """Issue 29 (query): reading only the rows of the user's keys: a partition of another mode is
    never opened (here it is not even a Parquet file)."""
    out = tmp_path / "shards"
    assert _compact(inline_cli, hub / "bundles", out).returncode == 0
    other = out / "mode=eval" / "device_class=cpu"
    other.mkdir(parents=True)
    (other / "data_0.parquet").write_bytes(b"not parquet at all")
    compared = inline_cli("compare", str(_mine(tmp_path)), "--against", str(out))
    assert compared.returncode == 0, compared.stderr
    assert "against 34 shared result(s)" in " ".join(compared.stdout.split())


def test_shards_without_duckdb_are_one_clear_line(hub: Path, tmp_path: Path, inline_cli,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 (query): Parquet present and DuckDB not installed: one line saying how to get it;
    bundles still read without it."""
    out = tmp_path / "shards"
    assert _compact(inline_cli, hub / "bundles", out).returncode == 0
    monkeypatch.setitem(sys.modules, "duckdb", None)
    mine = str(_mine(tmp_path))
    assert_one_line_error(inline_cli("compare", mine, "--against", str(out)), "Parquet shards",
                          "pip install 'accelbench[hub]'")
    assert inline_cli("compare", mine, "--against", str(hub / "bundles")).returncode == 0


def test_compact_in_worker_processes_through_the_real_cli(hub: Path, tmp_path: Path, cli, inline_cli) -> None:
    """Issue 29 (compact): the bundles are read in worker processes; the shards are the same as
    one process makes."""
    done = cli("hub", "compact", str(hub / "bundles"), "-o", str(tmp_path / "par"), "--workers", "2")
    assert done.returncode == 0, done.stderr
    one = inline_cli("hub", "compact", str(hub / "bundles"), "-o", str(tmp_path / "one"), "--workers", "1")
    assert one.returncode == 0, one.stderr
    connection = duckdb_connection("test")

    def rows(folder: Path) -> list[Any]:
        return connection.execute(f"SELECT hash, rate, outlier, implausible FROM read_parquet("
                                  f"'{folder}/**/*.parquet') ORDER BY hash").fetchall()

    assert rows(tmp_path / "par") == rows(tmp_path / "one") and len(rows(tmp_path / "one")) == 35
    assert (tmp_path / "par" / REFUSED).read_text() == (tmp_path / "one" / REFUSED).read_text()


def test_a_hugging_face_dataset_of_shards_offline(tmp_path: Path, inline_cli,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 (query): hf://datasets/... holding shards (here from the local cache, offline) is
    read through DuckDB like a local folder."""
    pytest.importorskip("huggingface_hub")
    shards = tmp_path / "shards"
    bundles = write_peer_bundles(tmp_path / "bundles")
    assert inline_cli("hub", "compact", str(bundles), "-o", str(shards), "--workers", "1").returncode == 0
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf-cache" / "datasets--acme--hub"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    for shard in shard_files(shards):
        target = repo / "snapshots" / commit / "shards" / shard.relative_to(shards)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(shard.read_bytes())
    # Imported before anything is patched: its constants are read from the environment once.
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    compared = inline_cli("compare", str(_mine(tmp_path)), "--against", "hf://datasets/acme/hub")
    assert compared.returncode == 0, compared.stderr
    assert "against 33 shared result(s)" in " ".join(compared.stdout.split())
    assert "Parquet shard(s)" in compared.stdout


def test_peer_records_fixture_is_unchanged() -> None:
    """The collection these tests compact: 33 machines of four device models."""
    assert len(peer_records()) == 33
