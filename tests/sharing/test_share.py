"""``accelbench share``: the bundle is safe to post (privacy), explains its figures, counts a result
once, and its readers skip bad lines with a warning naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest_report import assert_one_line_error
from conftest_share import EPYC_MODEL, H100_MODEL, environment, result, run

from accelbench.options import RunOptions
from accelbench.options.recorded import RecordedRun
from accelbench.results import ProcessRun
from accelbench.results.generation import Generation
from accelbench.sharing.build import build_bundle
from accelbench.sharing.bundle import BUNDLE_VERSION, dump_line
from accelbench.sharing.machine_id import machine_id_path, stored_machine_id
from accelbench.sharing.sources import load_peers
from accelbench.store.jsonfile import save_record
from accelbench.store.selftest_latest import latest_selftest, record_selftest

SECRETS = {
    "host name": "alice-laptop-7f3k",
    "user name": "alicesecretuser",
    "home": "/home/alicesecretuser",
    "data dir": "/srv/alice-private-datasets",
    "workload file": "/home/alicesecretuser/models/secret_model.py",
    "env var": "tok-SECRET-ABC123",
    "IPv4": "192.168.77.42",
    "IPv6": "fe80::1ff:fe23:4567:890a",
    "traceback": "Traceback (most recent call last): boom",
    "stderr": "segfault in secret kernel",
    "python": "/opt/alice-venv/bin/python",
}


def _planted(monkeypatch: pytest.MonkeyPatch):
    """A stored run whose every corner holds something that identifies the person or the host."""
    monkeypatch.setenv("USER", SECRETS["user name"])
    monkeypatch.setenv("LOGNAME", SECRETS["user name"])
    monkeypatch.setenv("HOME", SECRETS["home"])
    monkeypatch.setenv("ALICE_API_TOKEN", SECRETS["env var"])
    env = environment("cuda:0", H100_MODEL, hostname=SECRETS["host name"])
    env["python"]["executable"] = SECRETS["python"]
    env["machine"]["platform"] = f"Linux-{SECRETS['host name']}"
    env["network"] = {"ip": SECRETS["IPv4"], "ipv6": SECRETS["IPv6"]}
    env["variables"] = {"ALICE_API_TOKEN": SECRETS["env var"]}
    # A GPU name that (absurdly) carries the host name: the scrub must catch it.
    env["devices"]["cuda:0"]["name"] = f"{H100_MODEL} @ {SECRETS['host name']}"
    good = result(H100_MODEL, 40000.0)
    good.device_name = env["devices"]["cuda:0"]["name"]
    crashed = result(H100_MODEL, 1.0, seed=3, status="crashed", step_times=[],
                     error=f"{SECRETS['traceback']} in {SECRETS['workload file']} on {SECRETS['IPv4']}",
                     traceback=f"{SECRETS['traceback']}\n  File \"{SECRETS['workload file']}\"",
                     stderr_tail=[SECRETS["stderr"], f"connecting to {SECRETS['IPv6']}"])
    named = result(EPYC_MODEL, 900.0, seed=4, device="cpu")
    named.device_name = f"{EPYC_MODEL} ({SECRETS['user name']})"
    record = run("planted01", [good, crashed, named], env)
    record.command = ["accelbench", "run", "--workload-file", SECRETS["workload file"], "--data-dir",
                      SECRETS["data dir"], "-o", f"{SECRETS['home']}/out.json"]
    record.options = RecordedRun(RunOptions(data_dir=Path(SECRETS["data dir"]),
                                            workload_files=(SECRETS["workload file"],)))
    return record


def test_the_bundle_holds_nothing_that_identifies_a_person_or_host(tmp_path: Path, inline_cli,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    save_record(_planted(monkeypatch), tmp_path / "planted.json")
    out = tmp_path / "bundle.jsonl"
    shared = inline_cli("share", str(tmp_path / "planted.json"), "-o", str(out))
    assert shared.returncode == 0, shared.stderr
    text = out.read_text(encoding="utf-8")
    for what, secret in SECRETS.items():
        assert secret.casefold() not in text.casefold(), what
        for part in secret.strip("/").split("/"):
            if len(part) > 6:
                assert part.casefold() not in text.casefold(), (what, part)
    assert "alice" not in text.casefold()
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 3
    good, crashed, named = lines
    # What explains a figure is there.
    assert good["device"]["model"].startswith("redacted-")  # the model string carried the host name
    assert good["key"]["workload"] == "mnist" and good["key"]["batch_size"] == 64
    assert good["settings"]["backend_flags"]["cuda_matmul_allow_tf32"] is True
    assert good["settings"]["threads"] == 64 and good["software"]["torch"] == "2.6.0"
    assert good["settings"]["power"]["power_source"] == "AC" and good["host"]["os"] == "Linux"
    assert good["validity"]["selftest"] == "not run" and good["validity"]["noisy"] is False
    assert good["figures"]["samples_per_s"] > 0 and good["bundle"] == BUNDLE_VERSION
    # A failure is shared as its status only; the redacted CPU name says so rather than leaking.
    assert crashed["status"] == "crashed" and crashed["figures"] == {}
    assert "error" not in crashed and "traceback" not in json.dumps(crashed)
    assert named["device"]["model"].startswith("redacted-")
    assert named["device"]["model"] != good["device"]["model"]  # two names never become one


def test_dry_run_prints_exactly_what_would_be_shared(tmp_path: Path, inline_cli) -> None:
    save_record(run("dry01", [result(EPYC_MODEL, 900.0, device="cpu")], environment("cpu", EPYC_MODEL)),
                tmp_path / "r.json")
    written = inline_cli("share", str(tmp_path / "r.json"), "-o", str(tmp_path / "b.jsonl"))
    assert written.returncode == 0
    before = sorted(tmp_path.rglob("*"))
    dry = inline_cli("share", str(tmp_path / "r.json"), "--dry-run", "--json")
    assert dry.returncode == 0 and "nothing written" in dry.stderr
    assert sorted(tmp_path.rglob("*")) == before
    assert dry.stdout == (tmp_path / "b.jsonl").read_text(encoding="utf-8")


def test_the_machine_id_stays_until_a_new_one_is_asked_for_and_a_dry_run_writes_none(
        tmp_path: Path, inline_cli) -> None:
    """Issue 26 item 12b: ``share --dry-run --new-machine-id`` replaced the stored id while
    saying "nothing written". A dry run shows the id it would use and writes no id at all."""
    save_record(run("mid01", [result(EPYC_MODEL, 900.0, device="cpu")], environment("cpu", EPYC_MODEL)),
                tmp_path / "r.json")

    def machine_id(*flags: str) -> str:
        shared = inline_cli("share", str(tmp_path / "r.json"), "--dry-run", "--json", *flags)
        assert shared.returncode == 0, shared.stderr
        return json.loads(shared.stdout.splitlines()[0])["machine_id"]

    def shared_id(*flags: str) -> str:
        out = tmp_path / "b.jsonl"
        assert inline_cli("share", str(tmp_path / "r.json"), "-o", str(out), *flags).returncode == 0
        return json.loads(out.read_text().splitlines()[0])["machine_id"]

    assert not machine_id_path().exists()
    machine_id()  # the first dry run shows an id but stores none
    assert not machine_id_path().exists()
    first = shared_id()
    assert machine_id() == first and len(first) == 32 and stored_machine_id() == first  # a key's hash
    dry_new = inline_cli("share", str(tmp_path / "r.json"), "--dry-run", "--json", "--new-machine-id")
    shown = json.loads(dry_new.stdout.splitlines()[0])["machine_id"]
    assert shown != first and f"as machine {shown} (a new id, not stored" in dry_new.stderr
    assert stored_machine_id() == first and machine_id() == first  # nothing was written
    renewed = shared_id("--new-machine-id")
    assert renewed != first and machine_id() == renewed and stored_machine_id() == renewed


def test_the_same_result_counts_once_with_or_without_samples(tmp_path: Path) -> None:
    record = run("dup01", [result(EPYC_MODEL, 900.0, device="cpu")], environment("cpu", EPYC_MODEL))
    plain = build_bundle([record], "a" * 16)
    with_samples = build_bundle([record], "b" * 16, with_samples=True)
    (tmp_path / "one.jsonl").write_text(plain.text())
    (tmp_path / "two.jsonl").write_text(plain.text() + with_samples.text())
    sampled = json.loads(with_samples.lines[0])
    assert len(sampled["samples"][0]) == 40 and "samples" not in json.loads(plain.lines[0])
    loaded = load_peers([str(tmp_path)], print)
    assert len(loaded.peers) == 1 and loaded.duplicates == 2 and loaded.lines == 3


def test_repeats_share_their_per_process_figures(tmp_path: Path) -> None:
    case = result(EPYC_MODEL, 900.0, device="cpu")
    case.repeats = [ProcessRun(step_times=case.step_times[:20], median_step_s=0.07,
                               mean_step_s=0.071, measured_steps=20),
                    ProcessRun(step_times=case.step_times[20:], median_step_s=0.072,
                               mean_step_s=0.073, measured_steps=20)]
    line = json.loads(build_bundle([run("rep01", [case], environment("cpu", EPYC_MODEL))], "c" * 16).lines[0])
    assert [p["median_step_s"] for p in line["processes"]] == [0.07, 0.072]
    assert all(p["p10_step_s"] > 0 for p in line["processes"])


def test_selftest_keeps_its_latest_outcome_per_device_and_the_bundle_says_it() -> None:
    assert latest_selftest("cpu") is None
    record_selftest({"devices": ["cpu", "cuda:0"], "created_at": "2025-05-06T07:08:09+00:00",
                     "checks": [{"device": "cpu", "status": "pass"}, {"device": "cuda:0", "status": "fail"}]})
    assert latest_selftest("cpu")["passed"] is True and latest_selftest("cuda:1")["passed"] is False
    record_selftest({"devices": ["cuda:0"], "checks": [{"device": "cuda:0", "status": "pass"}]})
    assert latest_selftest("cuda:0")["passed"] is True and latest_selftest("cpu")["passed"] is True
    record = run("st01", [result(EPYC_MODEL, 900.0, device="cpu")], environment("cpu", EPYC_MODEL))
    line = json.loads(build_bundle([record], "d" * 16, selftest=latest_selftest).lines[0])
    assert line["validity"]["selftest"] == "passed" and line["validity"]["selftest_date"] == "2025-05-06"


def test_bad_lines_are_skipped_with_one_warning_each_and_the_rest_load(tmp_path: Path) -> None:
    record = run("bad01", [result(EPYC_MODEL, 900.0 + i, seed=i, device="cpu") for i in range(3)],
                 environment("cpu", EPYC_MODEL))
    good = build_bundle([record], "e" * 16).lines
    newer = json.loads(good[1])
    newer["bundle"] = BUNDLE_VERSION + 1
    hostile = json.loads(dump_line({**json.loads(good[2]), "hash": ""}))
    hostile["device"]["model"] = "<script>alert(1)</script>"
    escape = json.loads(good[2])
    escape["device"]["model"] = "EPYC\x1b[31m red"
    lines = [good[0], "{not json", json.dumps(newer), json.dumps(hostile), json.dumps(escape),
             json.dumps([1, 2]), '{"bundle": 1, "hash": "' + "0" * 64 + '", "status": "ok", "key": 3}']
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe broken\n" + good[2].encode() + b"\n")
    warnings: list[str] = []
    loaded = load_peers([str(path)], warnings.append)
    # Lines 2, 6 and 8 hold no "bundle" member: not bundle lines, counted in one warning; the
    # bundle lines that cannot be used are each named.
    assert len(loaded.peers) == 2 and sum(loaded.skipped.values()) == 4 and loaded.not_bundle == 3
    assert len(warnings) == 5 and all("\n" not in w and w.startswith(f"{path}") for w in warnings)
    by_line = {int(w.split(" line ")[1].split()[0]): w for w in warnings if " line " in w}
    assert f"bundle version {BUNDLE_VERSION + 1} is newer" in by_line[3]
    assert "hostile string" in by_line[4] and "hostile string" in by_line[5]
    assert "must be an object" in by_line[7]
    assert warnings[-1] == f"{path}: 3 line(s) that are not accelbench bundle lines skipped"
    assert loaded.skipped == {"newer format": 1, "hostile string": 2, "malformed": 1}


def test_sources_that_cannot_be_read_are_one_line_exit_2(tmp_path: Path, inline_cli) -> None:
    save_record(run("src01", [result(EPYC_MODEL, 900.0, device="cpu")], environment("cpu", EPYC_MODEL)),
                tmp_path / "r.json")
    (tmp_path / "empty").mkdir()
    for source, needle in ((str(tmp_path / "missing.jsonl"), "is not a bundle file"),
                           (str(tmp_path / "empty"), "holds no bundles"),
                           ("hf://datasets/onlyorg", "is not hf://datasets/ORG/NAME"),
                           ("http://127.0.0.1:9/none.jsonl", "cannot read source")):
        assert_one_line_error(inline_cli("compare", str(tmp_path / "r.json"), "--against", source), needle)
        assert_one_line_error(inline_cli("site", source, "-o", str(tmp_path / "site")), needle)


def test_bad_usage_is_one_line(tmp_path: Path, inline_cli) -> None:
    save_record(run("use01", [result(EPYC_MODEL, 900.0, device="cpu")], environment("cpu", EPYC_MODEL)),
                tmp_path / "r.json")
    assert_one_line_error(inline_cli("share", str(tmp_path / "r.json")), "-o FILE.jsonl", "--dry-run")
    assert_one_line_error(inline_cli("share", "--dry-run"), "no history database")
    missing_folder = str(tmp_path / "no" / "b.jsonl")
    assert_one_line_error(inline_cli("share", str(tmp_path / "r.json"), "-o", missing_folder),
                          "does not exist")
    assert_one_line_error(inline_cli("compare", "--against", str(tmp_path / "r.json")),
                          "--against needs runs")
    assert_one_line_error(inline_cli("site", str(tmp_path / "r.json")), "--output/-o")
    (tmp_path / "file").write_text("x")
    assert_one_line_error(inline_cli("site", str(tmp_path), "-o", str(tmp_path / "file")), "is a file")


def test_the_share_table_never_shows_a_status_as_a_rate() -> None:
    """Issue 36: a line with no headline figure showed "ok" in the unit column beside an empty
    rate; a status now reads under "status", the rate "n/a"."""
    from dataclasses import replace

    from conftest import rendered_text

    from accelbench.hub.push import submission
    from accelbench.render.submission import dry_run_renderable

    cases = [result(EPYC_MODEL, 500.0),
             replace(result(EPYC_MODEL, 500.0, step_times=[0.01] * 5, prompt_len=8, new_tokens=4,
                            generation=Generation(ttft_s=0.01)), mode="generate"),  # finished, no decode rate
             result(EPYC_MODEL, 500.0, workload="vae", status="failed", step_times=[], error="boom")]
    text = "".join(line + "\n" for line in build_bundle([run("s1", cases, environment("cpu", EPYC_MODEL))],
                                                       "m" * 32).lines)
    shown = rendered_text(dry_run_renderable(submission(text, "m" * 32)))
    rows = {tuple(line.split()[:2]): line for line in shown.splitlines() if line.startswith(("mnist", "vae"))}
    assert "samples/s" in rows["mnist", "train"] and " ok" not in rows["mnist", "train"]
    assert rows["mnist", "generate"].split()[-6:] == ["n/a", "ok,", "no", "rate", "in", "the", "line"][-6:]
    assert " n/a " in rows["mnist", "generate"]
    assert rows["vae", "train"].split()[-2:] == ["n/a", "failed"] and "samples/s" not in rows["vae", "train"]
