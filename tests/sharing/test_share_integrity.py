"""Issue 26 items 2-5: shared results are the same work, verified, counted as machines, and never
garbage. Every bundle here is written by the real ``share`` code and read by the real loader."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest_share import EPYC_MODEL, H100_MODEL, environment, result, run, write_bundle

from accelbench.compare.peers import TOO_FEW, PeerResult, place
from accelbench.measure.generation.rounds import GenerationFigures, GenerationRound
from accelbench.render.site import render_site
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import case_figures, headline
from accelbench.results.figures import Flops
from accelbench.results.generation import Generation
from accelbench.results.key import KEY_DEFAULTS, KEY_FIELDS, comparability_key
from accelbench.sharing import bundle as bundle_module
from accelbench.sharing.against import compare_against
from accelbench.sharing.build import build_bundle
from accelbench.sharing.bundle import content_hash, dump_line, parse_line
from accelbench.sharing.machine_id import machine_id
from accelbench.sharing.peer_view import peer_of
from accelbench.sharing.sources import load_peers
from accelbench.store.history import HistoryDB
from accelbench.store.jsonfile import save_record

# --- every key field, in every serialisation (item 2) ----------------------------------------------
#: Non-default values that make sense to the code that reads them; any other field (one the key
#: gains later) gets a generic one from its default's type.
_KNOWN = {"workload": "nanogpt-char", "mode": "generate", "precision": "bf16", "compile_backend": "inductor",
          "data": "synthetic-device", "size": "tiny"}
#: A second non-default value per field, for the variant that must not match.
_OTHER = {"workload": "gpt2", "mode": "eval", "precision": "fp16", "compile_backend": "aot_eager",
          "data": "real", "size": "small"}


def _value(name: str, other: bool = False) -> Any:
    known = _OTHER if other else _KNOWN
    if name in known:
        return known[name]
    default = KEY_DEFAULTS[name]
    if isinstance(default, bool):
        return default if other else not default  # a flag has one non-default value
    if isinstance(default, int):
        return default + (8 if other else 7)
    return f"{name}-{'y' if other else 'x'}"


def _generation(batch: int, prompt: int, new: int, tpot: float = 0.002) -> Generation:
    rounds = tuple(GenerationRound(0.004 + i * 1e-4, (new - 1) * tpot + i * 1e-5, (tpot,) * (new - 1))
                   for i in range(5))
    return Generation.from_dict(GenerationFigures(
        batch_size=batch, prompt_len=prompt, new_tokens=new, timing_method="host", rounds=rounds,
        warmup_rounds=1, kv_cache_bytes=1000, weight_bytes_per_step=10_000,
        cache_bytes_per_step=100).to_dict())


def _keyed_case(values: dict[str, Any]) -> CaseResult:
    """A finished case whose every key field is ``values``' (set one by one: a field the key
    gains later needs no edit here)."""
    case = result(EPYC_MODEL, 900.0, device="cpu", batch=7)
    for name, value in values.items():
        setattr(case, name, value)
    if case.mode == "generate":
        case.generation = _generation(case.batch_size, max(case.prompt_len, 1), max(case.new_tokens, 2))
    return case


def _line(case: CaseResult, machine: str = "a" * 16) -> dict[str, Any]:
    record = run("keyed001", [case], environment("cpu", EPYC_MODEL))
    return json.loads(build_bundle([record], machine).lines[0])


def test_every_key_field_reaches_every_serialisation(tmp_path: Path) -> None:
    """Issue 26 item 2: the bundle's key was written by hand and lacked prompt_len and new_tokens.
    For each KEY_FIELDS field at a non-default value: the bundle key carries it, the peer read back
    has it, a result differing only in it is no peer (place and the loader), the site gives it a
    section of its own, and the history's config key holds it."""
    values = {name: _value(name) for name in KEY_FIELDS}
    case = _keyed_case(values)
    line = _line(case)
    assert line["key"] == values
    mine = peer_of(parse_line(json.dumps(line)))
    assert mine is not None and mine.key == comparability_key(case) == tuple(values.values())
    with HistoryDB(tmp_path / "h.sqlite") as db:
        db.add_record(RunRecord("hist0001", "2026-01-01T00:00:00+00:00", "0.1.0", cases=[case]))
    (stored,) = sqlite3.connect(tmp_path / "h.sqlite").execute("SELECT config_key FROM cases").fetchone()
    assert json.loads(stored) == values
    for index, name in enumerate(KEY_FIELDS):
        variant_case = _keyed_case({**values, name: _value(name, other=True)})
        variant = peer_of(parse_line(json.dumps(_line(variant_case, "b" * 16))))
        assert variant is not None and variant.key[index] != mine.key[index], name
        assert variant.key[:index] + variant.key[index + 1:] == mine.key[:index] + mine.key[index + 1:]
        assert place(mine, [variant] * 6).groups == [], name
        folder = tmp_path / name
        folder.mkdir()
        write_bundle(folder / "b.jsonl", [run("var00001", [variant_case], environment("cpu", EPYC_MODEL))])
        assert load_peers([str(folder)], print, keys={mine.key}).peers == [], name
        pages = render_site([mine, variant], "now")
        sections = [(page, heading) for page, text in pages.items() if page.startswith("bench-")
                    for heading in re.findall(r"<h2>(.*?)</h2>", text)]
        assert len(set(sections)) == 2, (name, sections)


def _generate_record(prompt: int, tokens_per_s: float, machine_index: int,
                     model: str = H100_MODEL) -> RunRecord:
    case = result(model, 100.0, device="cuda:0", batch=1, workload="nanogpt-char", seed=machine_index,
                  size="tiny")
    case.mode, case.prompt_len, case.new_tokens = "generate", prompt, 8
    case.generation = _generation(1, prompt, 8, tpot=1 / tokens_per_s)
    return run(f"gen{prompt:03d}{machine_index:05d}", [case], environment("cuda:0", model))


def test_a_prompt_8_result_is_not_judged_against_prompt_16_peers(tmp_path: Path) -> None:
    """Issue 26 item 2: the reader filled prompt_len/new_tokens with 0, so generation results of
    different prompt lengths were "the same work"."""
    (tmp_path / "peers").mkdir()
    for index in range(6):
        write_bundle(tmp_path / "peers" / f"p16-{index}.jsonl", [_generate_record(16, 500.0, index)],
                     machine_id=f"{index:016x}")
    mine = _generate_record(8, 500.0, 99)
    comparisons, loaded = compare_against([("mine", mine)], [str(tmp_path / "peers")], print)
    assert loaded.lines == 6 and loaded.peers == []
    assert comparisons[0].placement.groups == [] and comparisons[0].placement.verdict == TOO_FEW


def test_a_generation_line_carries_the_catalogue_figures_and_its_headline_by_name() -> None:
    """Issue 26 item 2: a generation line's figure was named samples_per_s and carried no TTFT,
    prefill or decode figures; first-use figures were not shared at all (sustained ones, of
    training and evaluation, are: the consistency test holds them)."""
    record = _generate_record(16, 400.0, 1)
    case = record.cases[0]
    line = json.loads(build_bundle([record], "c" * 16).lines[0])
    figures = line["figures"]
    assert set(case_figures(case)) <= set(figures)
    for name in ("ttft_s", "tpot_s", "prefill_tokens_per_s", "decode_tokens_per_s_total", "itl_p50_s",
                 "first_use_s", "compile_s"):
        assert name in figures, name
    assert "samples_per_s" not in figures and line["rate_unit"] == "decode tokens/s"
    rate = figures[headline("generate").name]
    assert rate == pytest.approx(case.throughput(), rel=1e-5) and rate == pytest.approx(400.0, rel=3e-3)
    low, high = figures["rate_ci"]
    assert low <= rate <= high
    peer = peer_of(parse_line(build_bundle([record], "c" * 16).lines[0]))
    assert peer is not None and peer.throughput == rate
    train = json.loads(build_bundle([run("t1", [result(EPYC_MODEL, 900.0, device="cpu")],
                                         environment("cpu", EPYC_MODEL))], "c" * 16).lines[0])
    assert train["rate_unit"] == "samples/s" and train["figures"]["samples_per_s"] > 0


def _as_version_1(line: dict[str, Any]) -> str:
    """A line as version 1 wrote it: no prompt/new-token key fields, samples_per_s (its CI as
    samples_per_s_ci), no rate_unit or limits; hashed as version 1 hashed it."""
    old = {name: value for name, value in line.items() if name not in ("rate_unit", "limits")}
    old["bundle"] = 1
    old["key"] = {k: v for k, v in line["key"].items() if k not in ("prompt_len", "new_tokens")}
    figures = dict(line["figures"])
    figures["samples_per_s"] = figures.pop(headline(line["key"]["mode"]).name)
    figures["samples_per_s_ci"] = figures.pop("rate_ci")
    old["figures"] = figures
    old["hash"] = content_hash(old)
    return json.dumps(old)


def test_version_1_lines_are_upgraded_and_their_generation_lines_skipped(tmp_path: Path) -> None:
    """Issue 26 item 2: bundle version 2; a version-1 train line reads as before (prompt 0, new
    tokens 0), a version-1 generation line is not comparable: skipped with a counted reason."""
    train = json.loads(build_bundle([run("t1", [result(EPYC_MODEL, 900.0, device="cpu")],
                                         environment("cpu", EPYC_MODEL))], "d" * 16).lines[0])
    generate = json.loads(build_bundle([_generate_record(16, 400.0, 2)], "d" * 16).lines[0])
    (tmp_path / "old.jsonl").write_text(_as_version_1(train) + "\n" + _as_version_1(generate) + "\n")
    warnings: list[str] = []
    loaded = load_peers([str(tmp_path / "old.jsonl")], warnings.append)
    (peer,) = loaded.peers
    assert peer.key == tuple(train["key"][name] for name in KEY_FIELDS)
    assert peer.throughput == train["figures"]["samples_per_s"]
    assert loaded.skipped == {"version-1 generation line": 1}
    assert any("line 2 skipped: a version-1 generation line" in w for w in warnings)
    assert parse_line(_as_version_1(train))["figures"]["rate_ci"] == train["figures"]["rate_ci"]


# --- a forged line, invalid figures, machines (item 3) ---------------------------------------------
def _epyc_records(count: int, speed: float = 900.0) -> list[RunRecord]:
    return [run(f"ep{i:06d}", [result(EPYC_MODEL, speed * (1 + 0.01 * i), seed=i, device="cpu")],
                environment("cpu", EPYC_MODEL)) for i in range(count)]


def test_a_forged_line_is_skipped_and_never_shadows_the_genuine_one(tmp_path: Path) -> None:
    """Issue 26 item 3: a bundle whose figures were multiplied by 100 with the old hashes kept was
    accepted, and the genuine lines were dropped as its duplicates."""
    genuine = build_bundle(_epyc_records(6), "e" * 16).lines
    forged = []
    for text in genuine:
        line = json.loads(text)
        line["figures"]["samples_per_s"] *= 100
        forged.append(json.dumps(line))
    (tmp_path / "a-forged.jsonl").write_text("\n".join(forged) + "\n")  # read first
    (tmp_path / "b-genuine.jsonl").write_text("\n".join(genuine) + "\n")
    warnings: list[str] = []
    loaded = load_peers([str(tmp_path)], warnings.append)
    assert len(loaded.peers) == 6 and loaded.duplicates == 0
    assert max(p.throughput for p in loaded.peers) < 1000
    assert loaded.skipped == {"hash mismatch": 6}
    assert sum("a-forged.jsonl line" in w and "content hash does not match" in w for w in warnings) == 6
    assert "skipped 6 bundle line(s) (6 hash mismatch)" in loaded.summary()


def test_a_figure_above_its_devices_ceiling_is_flagged_and_left_out_of_the_band(tmp_path: Path) -> None:
    """Issue 26 item 3: a line whose decode bandwidth is above the bandwidth it carries (and more
    than its cache holds), or whose FLOP/s are above its carried peak, is invalid: kept apart."""
    records = [_generate_record(16, 400.0 + i, i) for i in range(7)]
    for index, record in enumerate(records):
        generation = record.cases[0].generation
        assert generation is not None and generation.effective_bandwidth_bytes_per_s is not None
        measured = generation.effective_bandwidth_bytes_per_s
        # Two lines claim a decode far above the bandwidth their device measured.
        over = index < 2
        generation.bandwidth_reference_bytes_per_s = measured / (10 if over else 0.5)
        generation.last_level_cache_bytes = 1
    for index, record in enumerate(records):
        write_bundle(tmp_path / f"m{index}.jsonl", [record], machine_id=f"{index:016x}")
    loaded = load_peers([str(tmp_path)], print)
    flagged = [p for p in loaded.peers if p.invalid]
    assert len(flagged) == 2 and all("of the device's measured bandwidth" in p.invalid for p in flagged)
    assert "2 flagged invalid" in loaded.summary()
    mine = peer_of(parse_line(build_bundle([_generate_record(16, 403.0, 99)], "f" * 16).lines[0]))
    assert mine is not None
    placement = place(mine, loaded.peers)
    assert placement.own is not None and placement.own.machines == 5 and placement.invalid == 2
    # FLOP/s above the carried peak.
    case = result(EPYC_MODEL, 900.0, device="cpu")
    case.flops = Flops(achieved_flops=5e12, peak_flops=1e12, fraction_of_peak=5.0)
    line = parse_line(build_bundle([run("fl1", [case], environment("cpu", EPYC_MODEL))], "0" * 16).lines[0])
    assert "500% of the device's measured peak FLOP/s" in peer_of(line).invalid


def test_peers_are_machines_and_my_own_machine_is_not_my_peer(tmp_path: Path, accelbench_home: Path) -> None:
    """Issue 26 item 3: one machine that shared many results was as many peers, and the user's
    own shared results were its peers."""
    one_machine = write_bundle(tmp_path / "one.jsonl", _epyc_records(8), machine_id="1" * 16)
    mine = run("mine0001", [result(EPYC_MODEL, 905.0, seed=50, device="cpu")], environment("cpu", EPYC_MODEL))
    comparisons, _ = compare_against([("mine", mine)], [str(one_machine)], print)
    placement = comparisons[0].placement
    assert placement.own is not None and placement.own.count == 8 and placement.own.machines == 1
    assert placement.verdict == TOO_FEW
    # Six machines, one of them this install: five peers, and my own results are not among them.
    own = machine_id()
    folder = tmp_path / "six"
    folder.mkdir()
    for index in range(5):
        write_bundle(folder / f"m{index}.jsonl", _epyc_records(1, 900.0 + index), machine_id=f"{index:016x}")
    write_bundle(folder / "mine.jsonl", _epyc_records(3, 2.0), machine_id=own)
    comparisons, loaded = compare_against([("mine", mine)], [str(folder)], print)
    placement = comparisons[0].placement
    assert len(loaded.peers) == 8
    assert placement.own is not None and placement.own.machines == 5 and placement.own.count == 5
    assert placement.verdict != TOO_FEW and placement.own.low > 800


# --- redacted names (item 4) -----------------------------------------------------------------------
def test_redacted_names_are_distinct_and_never_compared(tmp_path: Path, inline_cli,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26 item 4: every scrubbed name became "redacted", and all of them were compared (and
    given a site page) as one. Redacted names are salted hashes (distinct), and a line whose
    workload or device model is redacted is never a peer and gets no page."""
    monkeypatch.setenv("HOSTNAME", "secret-host-xyz")
    records = []
    for index in range(6):
        env = environment("cpu", f"CPU of secret-host-xyz {index}", hostname="secret-host-xyz")
        case = result(f"CPU of secret-host-xyz {index}", 900.0 + index, seed=index, device="cpu")
        records.append(run(f"red{index:05d}", [case], env))
    bundle = build_bundle(records, "9" * 16)
    models = [json.loads(line)["device"]["model"] for line in bundle.lines]
    assert all(m.startswith("redacted-") for m in models) and len(set(models)) == 6
    again = [json.loads(line)["device"]["model"] for line in build_bundle(records, "9" * 16).lines]
    assert set(again).isdisjoint(models)  # a salt per bundle: nothing matches across bundles
    (tmp_path / "redacted.jsonl").write_text(bundle.text())
    plain = write_bundle(tmp_path / "plain.jsonl", _epyc_records(2), machine_id="8" * 16)
    loaded = load_peers([str(tmp_path / "redacted.jsonl"), str(plain)], print)
    assert len(loaded.peers) == 2 and loaded.skipped == {"redacted name": 6}
    site = inline_cli("site", str(tmp_path / "redacted.jsonl"), str(plain), "-o", str(tmp_path / "site"))
    assert site.returncode == 0, site.stderr
    pages = "".join(p.read_text() for p in (tmp_path / "site").iterdir())
    assert "redacted" not in pages and len(list((tmp_path / "site").glob("device-*.html"))) == 1
    # An old line's plain "redacted" is never compared either.
    line = json.loads(bundle.lines[0])
    line["device"]["model"] = "redacted"
    with pytest.raises(ValueError, match="redacted"):
        peer_of(parse_line(dump_line({k: v for k, v in line.items() if k not in ("bundle", "hash")})))


# --- garbage is not read as results (item 5) -------------------------------------------------------
_LISTING = """<!DOCTYPE HTML>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Directory listing for /</title>
</head>
<body>
<h1>Directory listing for /</h1>
<hr>
<ul>
<li><a href="mnist.jsonl">mnist.jsonl</a></li>
<li><a href="peers.jsonl">peers.jsonl</a></li>
</ul>
<hr>
</body>
</html>
"""


def test_a_web_page_or_random_bytes_is_no_bundle(tmp_path: Path, inline_cli) -> None:
    """Issue 26 item 5: an HTML directory listing read "read 16 shared result(s)" and random
    bytes "read 13", with no warning."""
    mine = tmp_path / "mine.json"
    save_record(_epyc_records(1)[0], mine)
    listing = tmp_path / "listing.html"
    listing.write_text(_LISTING)
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes((i * 7919 + 13) % 256 for i in range(3000)))
    for source in (listing, noise):
        lines = sum(1 for raw in source.read_bytes().split(b"\n") if raw.strip())
        compared = inline_cli("compare", str(mine), "--against", str(source))
        assert compared.returncode == 0, compared.stderr
        out = " ".join(compared.stdout.split())
        assert (f"read 0 shared result(s) from 1 source(s); skipped {lines} line(s) that are not "
                "accelbench bundle lines") in out
        assert f"{source} is not an accelbench bundle: none of its {lines} line(s)" in compared.stderr
    assert _LISTING.count("\n") == 16
    # A real bundle with one stray line: its results are read, the stray line counted and named.
    bundle = write_bundle(tmp_path / "b.jsonl", _epyc_records(3))
    bundle.write_text(bundle.read_text() + "<html>oops</html>\n")
    compared = inline_cli("compare", str(mine), "--against", str(bundle))
    out = " ".join(compared.stdout.split())
    assert "read 3 shared result(s) from 1 source(s); skipped 1 line(s) that are not" in out
    assert f"{bundle}: 1 line(s) that are not accelbench bundle lines skipped" in compared.stderr


def test_results_of_other_work_passed_over_unparsed_are_counted_but_garbage_is_not(tmp_path: Path) -> None:
    """Issue 26 item 5: the fast path (lines not naming the wanted workload are not parsed) counts
    bundle lines it passes over as other work (issue 34: not as read; their hash is checked, so a
    changed line of other work is counted as skipped), and a line that is no bundle line as not one."""
    bundle = write_bundle(tmp_path / "b.jsonl", _epyc_records(4))
    lines = bundle.read_text().splitlines()
    lines[0] = lines[0].replace('"samples_per_s":', '"samples_per_s":1', 1)
    bundle.write_text("\n".join(lines) + "\nrandom words\n")
    key = PeerResult(("vae",) + comparability_key(result(EPYC_MODEL, 1.0))[1:], "cpu", "x", 1.0).key
    loaded = load_peers([str(bundle)], print, keys={key})
    assert loaded.lines == 0 and loaded.other_work == 3 and loaded.not_bundle == 1 and loaded.peers == []
    assert loaded.skipped == {"hash mismatch": 1}


def test_a_line_is_verified_on_its_own_text_and_a_second_hash_member_cannot_pose(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26 item 3: the hash is recomputed on every line read; a line as ``share`` writes it
    is verified on its own text (no second serialisation, the loader's speed), and a line that
    carries a genuine line's hash as a second "hash" member (its head hashed anew over forged
    content) is skipped, never that line's duplicate."""
    genuine = build_bundle(_epyc_records(1), "e" * 16).lines[0]
    data = json.loads(genuine)

    def no_serialising(line: dict[str, Any]) -> str:
        raise AssertionError("the fast path serialised the line again")

    with monkeypatch.context() as patch:
        patch.setattr(bundle_module, "content_hash", no_serialising)
        bundle_module.verify(data, genuine)
    payload = genuine.split(',"accelbench_version"', 1)[1]
    payload = '{"accelbench_version"' + payload
    forged_payload = payload.replace('"samples_per_s":', '"samples_per_s":1', 1)[:-1] \
        + f',"hash":"{data["hash"]}"}}'
    digest = hashlib.sha256(forged_payload.encode()).hexdigest()
    forged = f'{{"hash":"{digest}","machine_id":"{"f" * 16}",' + forged_payload[1:]
    (tmp_path / "a.jsonl").write_text(forged + "\n")
    (tmp_path / "b.jsonl").write_text(genuine + "\n")
    warnings: list[str] = []
    loaded = load_peers([str(tmp_path)], warnings.append)
    assert len(loaded.peers) == 1 and loaded.duplicates == 0 and loaded.skipped == {"hash mismatch": 1}
    assert loaded.peers[0].throughput == data["figures"]["samples_per_s"]
