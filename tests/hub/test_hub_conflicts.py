"""Issue 34, a hub no one can poison: machine and case ids are public, so a line resubmitted under a
victim's ids with other figures, under an earlier path, must never drop the genuine line as its
"duplicate". Signed lines settle it (the forged one is refused); unsigned lines that disagree are a
conflict (both quarantined and reported), whatever order they are met in. The same by the
JSON-lines path (compare --against, site) and by hub compact's SQL. Every line is written by the
real ``share`` (signed with the test's own data folder key); a forger's line is re-hashed, as a
forger would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest_share import EPYC_MODEL, environment, result, run, steps_for, write_bundle
from test_hub_push import hub_server  # noqa: F401 - the stand-in Hub, a fixture

from accelbench.compare.outliers import CONFLICT
from accelbench.sharing.bundle import dump_line, parse_line
from accelbench.sharing.shards import REFUSED, duckdb_connection
from accelbench.sharing.signing import BAD_SIGNATURE, FORGED_ID, Signer, id_of_key, verify_signature
from accelbench.sharing.sources import load_peers
from accelbench.store.jsonfile import save_record

pytest.importorskip("cryptography")


def _records(count: int, base: float = 900.0) -> list[Any]:
    return [run(f"vict{index:04d}", [result(EPYC_MODEL, base + 10 * index, seed=index, device="cpu")],
                environment("cpu", EPYC_MODEL)) for index in range(count)]


def _forge(line: dict[str, Any], factor: float, keep_signature: bool = False) -> str:
    """The line with its rate (and, consistently, its step times) scaled, re-hashed."""
    forged = json.loads(json.dumps(line))
    figures = forged["figures"]
    figures["samples_per_s"] *= factor
    for name in ("median_step_s", "p10_step_s", "mean_step_s"):
        figures[name] /= factor
    if not keep_signature:
        forged.pop("public_key", None)
        forged.pop("signature", None)
    return dump_line({k: v for k, v in forged.items() if k not in ("bundle", "hash")})


def _share(inline_cli: Any, tmp_path: Path, records: list[Any], out: Path) -> list[dict[str, Any]]:
    paths = [str(save_record(record, tmp_path / f"{record.run_id}.json")) for record in records]
    done = inline_cli("share", *paths, "-o", str(out))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def _hub(tmp_path: Path, genuine: Path, forged: list[str]) -> Path:
    """The genuine bundle under this month's path; the forged lines under an earlier month's."""
    hub = tmp_path / "hub"
    (hub / "bundles/2026/05/ab").mkdir(parents=True)
    (hub / "bundles/2026/05/ab/genuine.jsonl").write_bytes(genuine.read_bytes())
    (hub / "bundles/2020/01/00").mkdir(parents=True)
    (hub / "bundles/2020/01/00/0000.jsonl").write_text("".join(line + "\n" for line in forged))
    return hub


def test_share_signs_every_line_with_the_installations_key(tmp_path: Path, inline_cli,
                                                           accelbench_home: Path) -> None:
    """The machine id is the hash of the installation's public key, every line carries its key and
    a signature that verifies; the content hash is the unsigned line's; --new-machine-id makes a new
    key (and id); a dry run stores nothing."""
    lines = _share(inline_cli, tmp_path, _records(2), tmp_path / "a.jsonl")
    ids = {line["machine_id"] for line in lines}
    assert len(ids) == 1 and ids == {id_of_key(lines[0]["public_key"])}
    assert all(verify_signature(line) for line in lines)
    assert (accelbench_home / "machine-id").read_text().strip() == lines[0]["machine_id"]
    unsigned = dump_line({k: v for k, v in lines[0].items() if k not in ("bundle", "hash", "public_key",
                                                                         "signature")})
    assert json.loads(unsigned)["hash"] == lines[0]["hash"]
    assert parse_line(json.dumps(lines[0], separators=(",", ":")))["hash"] == lines[0]["hash"]
    again = _share(inline_cli, tmp_path, _records(1), tmp_path / "b.jsonl")
    assert again[0]["machine_id"] == lines[0]["machine_id"]
    key = (accelbench_home / "signing-key").read_text()
    assert (accelbench_home / "signing-key").stat().st_mode & 0o777 == 0o600
    dry = inline_cli("share", str(save_record(_records(1)[0], tmp_path / "c.json")), "--dry-run", "--json",
                     "--new-machine-id")
    assert dry.returncode == 0
    assert json.loads(dry.stdout.splitlines()[0])["machine_id"] != lines[0]["machine_id"]
    assert (accelbench_home / "signing-key").read_text() == key
    paths = [str(save_record(r, tmp_path / f"{r.run_id}.json")) for r in _records(1)]
    assert inline_cli("share", *paths, "-o", str(tmp_path / "d.jsonl"), "--new-machine-id").returncode == 0
    assert json.loads((tmp_path / "d.jsonl").read_text())["machine_id"] != lines[0]["machine_id"]


def test_a_forged_line_under_a_signed_id_keeps_the_genuine_one_out_of_nothing(tmp_path: Path,
                                                                              inline_cli) -> None:
    """Issue 34: forged lines under the victim's machine and case ids, filed under an earlier
    path (met first): unsigned, with the victim's key and a signature that does not verify, and
    signed with the forger's own key. Each is refused with its reason; the genuine line is kept,
    in the band, by compare --against's reading and by hub compact alike."""
    genuine_file = tmp_path / "genuine.jsonl"
    genuine = _share(inline_cli, tmp_path, _records(1), genuine_file)[0]
    forger = Signer.generate()
    own_key = json.loads(forger.sign_line(_forge(genuine, 10.0)))
    own_key["machine_id"] = genuine["machine_id"]  # the victim's id, the forger's key
    forged = [_forge(genuine, 10.0), _forge(genuine, 20.0, keep_signature=True),
              dump_line({k: v for k, v in own_key.items() if k not in ("bundle", "hash")})]
    hub = _hub(tmp_path, genuine_file, forged)
    warnings: list[str] = []
    loaded = load_peers([str(hub)], warnings.append)
    (peer,) = loaded.peers
    assert peer.content_hash == genuine["hash"] and peer.outlier == "" and loaded.conflicts == 0
    assert loaded.unsigned == 0  # the refused unsigned forgery is not counted among the results
    assert loaded.skipped == {FORGED_ID: 1, BAD_SIGNATURE: 2}
    assert any("forged" in w and "2020/01/00/0000.jsonl line 1" in w for w in warnings)
    assert any("does not verify" in w and "line 2" in w for w in warnings)
    pytest.importorskip("duckdb")
    out = tmp_path / "shards"
    done = inline_cli("hub", "compact", str(hub), "-o", str(out), "--workers", "1")
    assert done.returncode == 0, done.stderr
    rows = duckdb_connection("t").execute(
        f"SELECT hash, outlier FROM read_parquet('{out}/**/*.parquet')").fetchall()
    assert rows == [(genuine["hash"], "")]
    listed = (out / REFUSED).read_text().splitlines()
    refused = sorted((r["line"], r["reason"]) for r in map(json.loads, listed))
    assert refused == [(1, FORGED_ID), (2, BAD_SIGNATURE), (3, BAD_SIGNATURE)]
    assert "1 signed and verified, 0 unsigned" in " ".join(done.stderr.split())


def test_a_tampered_line_is_caught_as_a_bundle_is_read_with_nothing_to_disagree_with(tmp_path: Path,
                                                                                     inline_cli) -> None:
    """Issue 34: a signed line changed and re-hashed, keeping its signature, in a real bundle file
    where no other line shares its case: skipped as a bad signature, with a warning that names it,
    and the file's other (genuine) line read."""
    bundle = tmp_path / "bundle.jsonl"
    first, second = _share(inline_cli, tmp_path, _records(2), bundle)
    bundle.write_text(dump_line({k: v for k, v in first.items() if k not in ("bundle", "hash")}) + "\n"
                      + _forge(second, 3.0, keep_signature=True) + "\n")
    warnings: list[str] = []
    loaded = load_peers([str(bundle)], warnings.append)
    assert [peer.content_hash for peer in loaded.peers] == [first["hash"]]
    assert loaded.skipped == {BAD_SIGNATURE: 1} and loaded.conflicts == 0
    assert any("bundle.jsonl line 2" in w and "does not verify" in w for w in warnings), warnings


def _unsigned_pair(tmp_path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """An old (unsigned) machine's bundle of five results, and a forged line of its first case."""
    bundle = write_bundle(tmp_path / "old.jsonl", _records(5), machine_id="0123456789abcdef")
    lines = bundle.read_text().splitlines()
    return lines, [json.loads(line) for line in lines]


@pytest.mark.parametrize("forged_first", [True, False])
def test_unsigned_lines_that_disagree_are_a_conflict_in_either_order(tmp_path: Path, inline_cli,
                                                                     forged_first: bool) -> None:
    """Issue 34: without signatures nothing says which of two lines of one machine and case is
    genuine: both are kept out of every band (quarantined as a conflict) and reported, whichever
    is met first; hub compact's SQL decides the same rows."""
    lines, parsed = _unsigned_pair(tmp_path)
    forged = _forge(parsed[0], 1000.0)
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / ("a.jsonl" if forged_first else "z.jsonl")).write_text(forged + "\n")
    (hub / "m.jsonl").write_text("\n".join(lines) + "\n")
    warnings: list[str] = []
    loaded = load_peers([str(hub)], warnings.append)
    conflicted = {p.content_hash for p in loaded.peers if p.outlier == CONFLICT}
    assert conflicted == {parsed[0]["hash"], json.loads(forged)["hash"]} and len(loaded.peers) == 6
    assert loaded.conflicts == 2 and loaded.unsigned == 6 and loaded.duplicates == 0
    assert "2 quarantined, kept out of every band (2 in conflict" in loaded.summary()
    assert any(w.startswith("conflict: 2 lines of machine 0123456789abcdef") for w in warnings)
    pytest.importorskip("duckdb")
    out = tmp_path / "shards"
    done = inline_cli("hub", "compact", str(hub), "-o", str(out), "--workers", "1")
    assert done.returncode == 0, done.stderr
    rows = dict(duckdb_connection("t").execute(
        f"SELECT hash, outlier FROM read_parquet('{out}/**/*.parquet')").fetchall())
    assert {h for h, reason in rows.items() if reason == CONFLICT} == conflicted and len(rows) == 6
    said = " ".join(done.stderr.split())
    assert "2 in conflict" in said and "0 signed and verified, 6 unsigned" in said


def test_a_bundle_line_in_conflict_with_a_shard_row_is_one_count(tmp_path: Path) -> None:
    """Issue 34: a machine's results compacted into shards by the real hub compact, and a bundle
    submitted since with a forged line of one of its cases (other figures): the shard row and the
    bundle line are a conflict, both quarantined, reported, and counted in ``Loaded.conflicts``."""
    pytest.importorskip("duckdb")
    from accelbench.hub.compact import compact
    from accelbench.sharing.query import read_collection

    lines, parsed = _unsigned_pair(tmp_path)
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "m.jsonl").write_text("\n".join(lines) + "\n")
    compact([str(tmp_path / "hub")], tmp_path / "shards", lambda _: None, workers=1)
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "forged.jsonl").write_text(_forge(parsed[0], 1000.0) + "\n" + lines[1] + "\n")
    warnings: list[str] = []
    _, loaded = read_collection([str(tmp_path / "shards"), str(tmp_path / "new")], warnings.append)
    assert loaded.conflicts == 2 and loaded.outliers == 2, loaded.summary()
    assert "2 in conflict" in loaded.summary()
    assert any("Parquet shard" in w and "conflict" in w for w in warnings), warnings
    # The compacted line itself in a bundle again: one result, nothing in conflict.
    (tmp_path / "new" / "forged.jsonl").write_text(lines[0] + "\n")
    _, again = read_collection([str(tmp_path / "shards"), str(tmp_path / "new")], warnings.append)
    assert again.conflicts == 0 and again.outliers == 0


def test_a_forged_bundle_line_keeps_a_signed_shard_row_out_of_nothing(tmp_path: Path, inline_cli) -> None:
    """Issue 34: a signed machine's line compacted into shards (which record that it was signed),
    and an unsigned forged line of its case in a bundle submitted since: the forged line is
    refused (forged), the genuine row stays in the bands, nothing is in conflict."""
    pytest.importorskip("duckdb")
    from accelbench.hub.compact import compact
    from accelbench.sharing.query import read_collection

    (tmp_path / "hub").mkdir()
    genuine = _share(inline_cli, tmp_path, _records(1), tmp_path / "hub" / "genuine.jsonl")[0]
    compact([str(tmp_path / "hub")], tmp_path / "shards", lambda _: None, workers=1)
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "forged.jsonl").write_text(_forge(genuine, 10.0) + "\n")
    warnings: list[str] = []
    _, loaded = read_collection([str(tmp_path / "shards"), str(tmp_path / "new")], warnings.append)
    assert loaded.skipped == {FORGED_ID: 1}, loaded.summary()
    assert loaded.conflicts == 0 and loaded.outliers == 0
    assert loaded.shard_rows == 1 and loaded.unsigned == 0
    assert any("forged" in w for w in warnings), warnings


def test_a_case_shared_again_with_the_same_figures_is_one_result(tmp_path: Path) -> None:
    """A case re-shared by its machine with another validity (its selftest ran since) and the same
    figures is a duplicate, not a conflict: one result, counted once."""
    lines, parsed = _unsigned_pair(tmp_path)
    again = json.loads(json.dumps(parsed[0]))
    again["validity"]["selftest"] = "passed"
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "a.jsonl").write_text(dump_line({k: v for k, v in again.items() if k not in ("bundle", "hash")})
                                 + "\n" + "\n".join(lines) + "\n")
    loaded = load_peers([str(hub)], print)
    assert len(loaded.peers) == 5 and loaded.duplicates == 1 and loaded.conflicts == 0
    assert not any(p.outlier for p in loaded.peers)


def test_steps_for_is_the_rate_the_lines_carry() -> None:
    """The forged lines above scale the step times with the rate, so that only the conflict (not
    the line's own consistency) can catch them."""
    assert abs(64 / sorted(steps_for(900.0))[20] - 900.0) / 900.0 < 0.02


def test_one_count_of_what_was_kept_apart_everywhere(tmp_path: Path, inline_cli) -> None:
    """Issue 34: the placement, compare --against's --json and summary, site and hub compact count
    the same quarantined results (ten outliers and a conflict's two lines), from the bundles and
    from the shards; a changed line of other work is reported as skipped (it was not before: only
    lines naming the user's workload were checked), and lines of other work are not counted as read."""
    from test_line_consistency import I7, _population

    hub = tmp_path / "hub"
    rates = _population(hub, honest=60)
    honest = next(m for m in rates if not m.startswith("f"))
    (line,) = [json.loads(text) for text in (hub / f"{honest}.jsonl").read_text().splitlines()]
    (hub / "zz-conflict.jsonl").write_text(_forge(line, 1.5) + "\n")
    other = write_bundle(tmp_path / "other.jsonl", [run("oth00001", [result(I7, 50.0, workload="vae")],
                                                        environment("cpu", I7))], machine_id="e" * 16)
    (hub / "other.jsonl").write_text(other.read_text().replace('"samples_per_s":', '"samples_per_s":1', 1))
    record = run("mine0001", [result(I7, 20.0, device="cpu")], environment("cpu", I7, hostname="me"))
    mine = save_record(record, tmp_path / "mine.json")

    def against(source: Path) -> dict[str, Any]:
        shown = inline_cli("compare", str(mine), "--against", str(source), "--json")
        return json.loads(shown.stdout)["against"]

    shown = inline_cli("compare", str(mine), "--against", str(hub), "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)["against"]
    (placement,) = data["placements"]
    assert placement["outliers"] == 12 and data["read"]["outliers"] == 12 and data["read"]["conflicts"] == 2
    assert data["read"]["skipped"] == {"hash mismatch": 1} and data["read"]["other_work"] == 0
    assert data["read"]["lines"] == 71 and "12 quarantined" in data["read"]["summary"]
    pytest.importorskip("duckdb")
    out = tmp_path / "shards"
    done = inline_cli("hub", "compact", str(hub), "-o", str(out), "--workers", "1")
    assert done.returncode == 0 and "12 quarantined" in done.stderr, done.stderr
    assert "1 hash mismatch" in done.stderr
    from_shards = against(out)
    assert from_shards["placements"][0]["outliers"] == 12 and from_shards["read"]["outliers"] == 12
    site = inline_cli("site", str(hub), "-o", str(tmp_path / "site"))
    assert site.returncode == 0, site.stderr
    assert "12 result(s) flagged invalid" in (tmp_path / "site" / "index.html").read_text()
    # Of other work: a line of another workload is only hash-checked and counted apart.
    ok_other = tmp_path / "ok-other"
    ok_other.mkdir()
    (ok_other / "other.jsonl").write_bytes(other.read_bytes())
    apart = against(ok_other)
    assert apart["read"]["other_work"] == 1 and apart["read"]["lines"] == 0 and apart["read"]["skipped"] == {}


def test_a_push_already_on_the_hub_sends_nothing(tmp_path: Path, cli, hub_server) -> None:  # noqa: F811
    """Issue 34: the same bundle pushed again while its pull request is open opens no second pull
    request ("already there; nothing sent"), and neither does one already merged into main, nor one
    pushed in an earlier month (its path under that month's folder), to the Hub or a folder; the
    real huggingface_hub client against the stand-in of tests/hub/test_hub_push.py."""
    pytest.importorskip("huggingface_hub")
    address, hub = hub_server
    record = save_record(_records(1)[0], tmp_path / "run.json")
    env = {"HF_ENDPOINT": address, "HF_TOKEN": "hf_test_token", "HF_HOME": str(tmp_path / "hf-home"),
           "HF_HUB_DISABLE_TELEMETRY": "1"}
    target = ("share", str(record), "--push", "hf://datasets/acme/results", "--yes")
    first = cli(*target, env=env)
    assert first.returncode == 0 and "pull request" in first.stderr, first.stderr
    (path,) = hub.files["refs/pr/7"]
    again = cli(*target, env=env)
    assert again.returncode == 0, again.stderr
    assert "already there; nothing sent" in again.stderr and "open pull request" in again.stderr
    assert len(hub.commits) == 1
    hub.open_requests.clear()  # merged
    hub.files["main"].add(path)
    merged = cli(*target, env=env)
    assert "on the main branch" in merged.stderr and "nothing sent" in merged.stderr
    assert len(hub.commits) == 1
    # Pushed in an earlier month: its path names that month, and it is found there all the same.
    earlier = "bundles/2025/06/" + path.split("/", 3)[3]
    hub.files["main"] = {earlier}
    months_ago = cli(*target, env=env)
    assert "nothing sent" in months_ago.stderr and earlier in " ".join(months_ago.stderr.split())
    assert len(hub.commits) == 1
    # ... and in a folder hub alike.
    folder = tmp_path / "hub"
    assert cli("share", str(record), "--push", str(folder), "--yes", env=env).returncode == 0
    (written,) = folder.rglob("*.jsonl")
    (folder / earlier).parent.mkdir(parents=True)
    written.rename(folder / earlier)
    again_here = cli("share", str(record), "--push", str(folder), "--yes", env=env)
    assert "already holds this bundle" in again_here.stderr and not written.exists()


def test_a_line_not_in_canonical_form_is_signed_over_the_hash_it_is_written_with() -> None:
    """A line another writer laid out (a space in a list), hashed over its own text, is written
    canonically when signed: the signature is over the hash the written line carries, so it
    verifies (it was over the old text's hash, and never verified)."""
    import hashlib

    from accelbench.sharing.build import build_bundle

    text = build_bundle(_records(1), "0123456789abcdef").lines[0]
    loose = text[text.index('"accelbench_version"'):].replace('"rate_ci":[', '"rate_ci": [', 1)
    digest = hashlib.sha256(("{" + loose).encode()).hexdigest()
    laid_out = f'{{"hash":"{digest}","machine_id":"0123456789abcdef",' + loose
    assert parse_line(laid_out)["hash"] == digest
    signed = Signer.generate().sign_line(laid_out)
    assert verify_signature(parse_line(signed))
