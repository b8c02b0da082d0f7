"""Sources of shared results, end to end: a real HTTP server on 127.0.0.1, a Hugging Face dataset
read offline from a local cache the test writes (the loading code users run, with HF_HUB_OFFLINE),
and ``run --against`` on a real tiny run."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest_report import assert_one_line_error
from conftest_share import EPYC_MODEL, environment, result, run, write_bundle, write_peer_bundles

from accelbench.store.jsonfile import save_record


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real HTTP server serving tmp_path/www on 127.0.0.1 (a free port), in a thread."""
    root = tmp_path / "www"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()


def _mine(tmp_path: Path) -> Path:
    record = run("mine0001", [result(EPYC_MODEL, 300.0, threads=8)], environment("cpu", EPYC_MODEL,
                                                                                  hostname="me"))
    return save_record(record, tmp_path / "mine.json")


def test_an_http_source(tmp_path: Path, server: tuple[str, Path], inline_cli) -> None:
    address, root = server
    folder = write_peer_bundles(tmp_path / "peers")
    (root / "all.jsonl").write_text("".join(p.read_text() for p in sorted(folder.glob("*.jsonl"))))
    compared = inline_cli("compare", str(_mine(tmp_path)), "--against", f"{address}/all.jsonl")
    assert compared.returncode == 0, compared.stderr
    out = " ".join(compared.stdout.split())
    assert "against 33 shared result(s)" in out and "below" in out
    assert "threads 8; peers: 64 (10 of 10)" in out
    missing = f"{address}/missing.jsonl"
    assert_one_line_error(inline_cli("compare", str(_mine(tmp_path)), "--against", missing),
                          "HTTP 404")


def _hf_cache(cache: Path, folder: Path) -> None:
    """The layout huggingface_hub keeps for a downloaded dataset: refs/main names the commit,
    snapshots/<commit>/ holds the files."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "datasets--acme--accelbench-results"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit / "bundles"
    snapshot.mkdir(parents=True)
    for bundle in folder.glob("*.jsonl"):
        (snapshot / bundle.name).write_bytes(bundle.read_bytes())


def test_a_hugging_face_dataset_offline(tmp_path: Path, cli) -> None:
    pytest.importorskip("huggingface_hub")
    cache = tmp_path / "hf-cache"
    _hf_cache(cache, write_peer_bundles(tmp_path / "peers"))
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "COLUMNS": "100"}
    compared = cli("compare", str(_mine(tmp_path)), "--against", "hf://datasets/acme/accelbench-results",
                   env=env)
    assert compared.returncode == 0, compared.stderr
    assert "against 33 shared result(s)" in " ".join(compared.stdout.split())
    assert "read 33 shared result(s) from 1 source(s)" in compared.stdout
    site = cli("site", "hf://datasets/acme/accelbench-results/bundles", "-o", str(tmp_path / "site"), env=env)
    assert site.returncode == 0, site.stderr
    assert (tmp_path / "site" / "index.html").exists()
    missing = cli("compare", str(_mine(tmp_path)), "--against", "hf://datasets/acme/nothing-here", env=env)
    assert_one_line_error(missing, "cannot read source hf://datasets/acme/nothing-here")


@pytest.mark.slow
def test_run_against_a_bundle_on_a_real_tiny_run(tmp_path: Path, cli) -> None:
    """The mnist tiny train case (batch 8) of a real run, among six shared results of that work."""
    peers = [run(f"tiny{i:04d}", [result(EPYC_MODEL, 400.0 + 10 * i, seed=i, batch=8, size="tiny")],
                 environment("cpu", EPYC_MODEL)) for i in range(6)]
    bundle = write_bundle(tmp_path / "tiny.jsonl", peers)
    done = cli("run", "mnist", "--size", "tiny", "--steps", "3", "--device", "cpu", "--mode", "train",
               "--isolation", "none", "--quiet", "--against", str(bundle), env={"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    assert "against 6 shared result(s)" in " ".join(done.stdout.split())
    assert EPYC_MODEL.split()[0] in done.stdout
    missing = cli("run", "mnist", "--size", "tiny", "--steps", "3", "--device", "cpu",
                  "--against", str(tmp_path / "absent.jsonl"))
    assert_one_line_error(missing, "absent.jsonl")
    assert "Saved to" not in missing.stdout  # refused before anything ran


def test_a_real_selftest_is_remembered_and_shared(tmp_path: Path, cli, inline_cli) -> None:
    checked = cli("selftest", "--device", "cpu", "--only", "precision", "--quick")
    assert checked.returncode == 0, checked.stderr
    shared = inline_cli("share", str(_mine(tmp_path)), "--dry-run", "--json")
    assert shared.returncode == 0, shared.stderr
    validity = json.loads(shared.stdout.splitlines()[0])["validity"]
    assert validity["selftest"] == "passed" and validity["selftest_groups"] == ["precision"]


def test_a_large_collection_is_read_by_a_process_per_cpu_with_the_same_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 (the 100,000-result figures): a collection above PARALLEL_BYTES is read by forked
    processes, one per CPU; the peers, duplicates, skipped lines and warnings are what one process
    reads, in the same order."""
    import os
    from concurrent.futures import ProcessPoolExecutor

    from accelbench.sharing import sources

    folder = write_peer_bundles(tmp_path / "peers")
    copy = (folder / "machine003.jsonl").read_bytes()
    (folder / "zz-copy.jsonl").write_bytes(copy + b'{"bundle": 2, broken\n')

    def read() -> tuple[Any, list[str]]:
        warnings: list[str] = []
        return sources.load_peers([str(folder)], warnings.append), warnings

    monkeypatch.setattr(sources, "PARALLEL_BYTES", 10**12)
    serial, serial_warnings = read()
    monkeypatch.setattr(sources, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(sources, "_fork_is_safe", lambda: True)  # this test process may hold torch
    pools: list[int] = []

    class Recorded(ProcessPoolExecutor):
        def __init__(self, workers: int, **options: Any) -> None:
            pools.append(workers)
            super().__init__(workers, **options)

    monkeypatch.setattr(sources, "ProcessPoolExecutor", Recorded)
    parallel, parallel_warnings = read()
    assert pools == [2]
    assert parallel.peers == serial.peers and len(serial.peers) == 33
    assert (parallel.duplicates, parallel.skipped, parallel.lines) == (1, serial.skipped, serial.lines)
    assert parallel_warnings == serial_warnings
    assert any("zz-copy.jsonl line 2 skipped" in w for w in serial_warnings)
