"""Issue 29, plausibility per machine, never a global cap: a line beyond its own device's limits,
contradicting its own TTFT and TPOT, or with tokens that do not match is marked implausible
(kept, shown apart, out of the band); outliers far above their device model (median/MAD, issue 34)
are quarantined with the reason, never deleted, the same by the JSON-lines path and by hub
compact's SQL. Every line is written by the real ``share`` code (a forged figure re-hashed, as a
forger would)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest_share import EPYC_MODEL, H100_MODEL, environment, result, run, write_bundle

from accelbench.compare.outliers import OUTLIER_MIN_MACHINES, mark_outliers
from accelbench.compare.peers import PeerResult, place
from accelbench.measure.generation.rounds import GenerationFigures, GenerationRound
from accelbench.options import RunOptions
from accelbench.options.recorded import RecordedRun
from accelbench.results.figures import Flops
from accelbench.results.generation import Generation
from accelbench.results.records import RunRecord
from accelbench.sharing.build import build_bundle
from accelbench.sharing.bundle import dump_line, parse_line
from accelbench.sharing.peer_view import peer_of
from accelbench.sharing.shards import duckdb_connection
from accelbench.sharing.sources import load_peers


def _generation(tpot: float = 0.002, **extra: Any) -> Generation:
    rounds = tuple(GenerationRound(0.004 + i * 1e-4, 7 * tpot + i * 1e-5, (tpot,) * 7) for i in range(5))
    figures = GenerationFigures(batch_size=2, prompt_len=16, new_tokens=8, timing_method="host",
                                rounds=rounds, warmup_rounds=1, kv_cache_bytes=1000,
                                weight_bytes_per_step=10_000,
                                cache_bytes_per_step=100).to_dict()
    return Generation.from_dict({**figures, **extra})


def _generate_record(**generation: Any) -> RunRecord:
    case = result(H100_MODEL, 100.0, device="cuda:0", batch=2, workload="nanogpt-char", size="tiny")
    case.mode, case.prompt_len, case.new_tokens = "generate", 16, 8
    case.generation = _generation(**generation)
    return run("gen00001", [case], environment("cuda:0", H100_MODEL))


def _line(record: RunRecord) -> dict[str, Any]:
    return json.loads(build_bundle([record], "a" * 16).lines[0])


def _forged(line: dict[str, Any]) -> PeerResult:
    """The line re-hashed after a change (a forger's line: its hash verifies)."""
    peer = peer_of(parse_line(dump_line({k: v for k, v in line.items() if k not in ("bundle", "hash")})))
    assert peer is not None
    return peer


def test_a_generation_line_must_agree_with_its_own_ttft_and_tpot() -> None:
    """Issue 29 (plausibility): the catalogue defines decode rates as 1/TPOT and B/TPOT and prefill
    as B x P / TTFT: a line whose rate disagrees with the times it is made of is implausible."""
    line = _line(_generate_record())
    assert _forged(line).invalid == ""
    figures = line["figures"]
    for name, factor, reason in (("decode_tokens_per_s_total", 3.0, "batch / TPOT"),
                                 ("decode_tokens_per_s", 3.0, "1 / TPOT"),
                                 ("prefill_tokens_per_s", 3.0, "batch x prompt / TTFT"),
                                 ("ttft_s", -1.0, "time to first token that is not positive"),
                                 ("tpot_p99_s", 0.5, "tpot_p99_s below tpot_s")):
        forged = json.loads(json.dumps(line))
        forged["figures"][name] = figures[name] * factor
        assert reason in _forged(forged).invalid, name


def test_decode_bandwidth_is_read_from_bytes_times_tokens_per_s() -> None:
    """Issue 29 (plausibility): decode bytes x tokens/s above the measured bandwidth is implausible
    even where the line understates its decode bandwidth figure; within the cache it is not."""
    line = _line(_generate_record())
    figures = line["figures"]
    decode = figures["bytes_per_token"] * figures["decode_tokens_per_s"]
    line["limits"] = {"bandwidth_bytes_per_s": decode / 3, "last_level_cache_bytes": 1}
    line["figures"]["decode_bandwidth_bytes_per_s"] = decode / 10  # understated
    assert "of the device's measured bandwidth" in _forged(line).invalid
    line["limits"]["last_level_cache_bytes"] = 10**9  # every byte fits the cache
    assert _forged(line).invalid == ""


def test_flops_above_the_published_peak_without_a_measured_one() -> None:
    """Issue 29 (plausibility): FLOP/s above the measured peak, or without one above the device's
    published peak for its precision, is implausible; a device with no published peak is not
    judged by a global cap."""
    case = result("Apple M1 GPU (MPS)", 900.0, device="mps")
    case.flops = Flops(achieved_flops=5e12, peak_flops=None, fraction_of_peak=None)
    line = _line(run("fl000001", [case], environment("mps", "Apple M1 GPU (MPS)")))
    assert "of the device's published peak FLOP/s" in _forged(line).invalid
    line["device"]["model"] = "Some Unknown Accelerator"
    assert _forged(line).invalid == ""
    line["limits"]["peak_flops"] = 1e12
    assert "of the device's measured peak FLOP/s" in _forged(line).invalid


def test_tokens_that_do_not_match_the_reference_are_marked() -> None:
    """Issue 29 (plausibility): a generation line whose tokens hash differs from the reference it
    names, or that says its tokens do not match, is implausible; matching tokens are not."""
    same = _line(_generate_record(tokens_hash="ab" * 8, tokens_reference_hash="ab" * 8))
    assert _forged(same).invalid == ""
    mismatch = _forged(_line(_generate_record(tokens_hash="ab" * 8, tokens_reference_hash="cd" * 8)))
    assert "do not match the reference hash" in mismatch.invalid
    said = _forged(_line(_generate_record(tokens_hash="ab" * 8, tokens_match=False)))
    assert "do not match the reference" in said.invalid


def _machines(count: int, seed: int = 0) -> list[PeerResult]:
    rng = np.random.default_rng(seed)
    key = ("mnist",) + tuple(range(12))
    return [PeerResult(key, "cuda", H100_MODEL, float(v), machine_id=f"{i:016x}")
            for i, v in enumerate(rng.lognormal(10, 0.1, count))]


def test_outliers_far_above_their_device_model_are_quarantined() -> None:
    """Issue 29 (plausibility), made robust in issue 34: the machines far above the others of their
    device model (median/MAD on log rates, at least 4x) are quarantined (kept, with the reason, out
    of the band); the honest spread is not; below OUTLIER_MIN_MACHINES nothing is."""
    peers = _machines(250)
    planted = [PeerResult(peers[0].key, "cuda", H100_MODEL, 5 * p.throughput, machine_id=f"f{i:015x}")
               for i, p in enumerate(peers[:2])]
    marked = mark_outliers(peers + planted)
    flagged = [p for p in marked if p.outlier]
    assert {p.machine_id for p in flagged} == {p.machine_id for p in planted}
    assert "of the 252 " + H100_MODEL + " machines" in flagged[0].outlier
    mine = PeerResult(peers[0].key, "cuda", H100_MODEL, peers[0].throughput, machine_id="me")
    placement = place(mine, marked)
    assert placement.outliers == 2 and placement.own is not None and placement.own.machines == 250
    assert placement.own.best < min(p.throughput for p in flagged)
    few = _machines(OUTLIER_MIN_MACHINES - 2) + planted[:1]
    assert not any(p.outlier for p in mark_outliers(few))


def test_compact_quarantines_the_same_machines_with_the_same_words(tmp_path: Path, inline_cli) -> None:
    """Issue 29 (plausibility): hub compact's SQL quarantines the machines the JSON-lines path does,
    with the same reason; the rows are kept."""
    pytest.importorskip("duckdb")
    rng = np.random.default_rng(5)
    folder = tmp_path / "bundles"
    folder.mkdir()
    records = []
    for index, speed in enumerate([*rng.lognormal(7, 0.05, 40), 5000.0, 9000.0]):
        records.append(run(f"m{index:07d}", [result(EPYC_MODEL, float(speed), seed=index, device="cpu")],
                           environment("cpu", EPYC_MODEL)))
    for start in range(0, len(records), 50):
        for offset, record in enumerate(records[start:start + 50]):
            index = start + offset
            write_bundle(folder / f"b{index:04d}.jsonl", [record], machine_id=f"{index:016x}")
    expected = {p.machine_id: p.outlier for p in mark_outliers(load_peers([str(folder)], print).peers)
                if p.outlier}
    assert expected
    done = inline_cli("hub", "compact", str(folder), "-o", str(tmp_path / "shards"), "--workers", "1")
    assert done.returncode == 0, done.stderr
    rows = duckdb_connection("test").execute(
        f"SELECT machine_id, outlier FROM read_parquet('{tmp_path / 'shards'}/**/*.parquet') "
        "WHERE outlier <> ''").fetchall()
    assert dict(rows) == expected
    assert f"{len(expected)} quarantined" in done.stderr


def test_a_line_naming_no_reference_is_held_to_the_shipped_tokens() -> None:
    """Issues 28/29: the fp64 reference's tokens ship with accelbench (reference/expected_tokens.json);
    a line that names no reference of its own is held to them (a forged line cannot drop its
    reference to escape the check)."""
    from accelbench.reference.expected_tokens import TokenKey, expected

    shipped = expected(TokenKey("nanogpt-char", 1, "tiny", 0, 1, 16, 16))
    assert shipped is not None, "the shipped tokens cover nanogpt-char tiny, batch 1, 16 + 16"

    def line(tokens_hash: str) -> dict[str, Any]:
        record = _generate_record(tokens_hash=tokens_hash)
        case = record.cases[0]
        case.batch_size, case.prompt_len, case.new_tokens = 1, 16, 16
        rounds = tuple(GenerationRound(0.004, 15 * 0.002, (0.002,) * 15) for _ in range(5))
        case.generation = Generation.from_dict({**GenerationFigures(
            batch_size=1, prompt_len=16, new_tokens=16, timing_method="host", rounds=rounds,
            warmup_rounds=1, kv_cache_bytes=1000, weight_bytes_per_step=10_000,
            cache_bytes_per_step=100).to_dict(), "tokens_hash": tokens_hash})
        return _line(record)

    assert _forged(line(shipped["hash"])).invalid == ""
    assert "do not match the reference hash" in _forged(line("ef" * 32)).invalid


def test_the_shipped_reference_wins_over_the_one_a_line_names() -> None:
    """A forger controls the reference hash a line names: where accelbench ships the reference
    for the line's work and seed, that one is held, and a line naming another is marked; a line
    from another seed is held to its own seed's reference (none shipped: not marked)."""
    from accelbench.reference.expected_tokens import TokenKey, expected

    shipped = expected(TokenKey("nanogpt-char", 1, "tiny", 0, 1, 16, 16))
    assert shipped is not None

    def line(tokens_hash: str, seed: int = 0, **validity: Any) -> PeerResult:
        record = _generate_record(tokens_hash=tokens_hash, **validity)
        record.options = RecordedRun(RunOptions(seed=seed))
        case = record.cases[0]
        case.batch_size, case.prompt_len, case.new_tokens = 1, 16, 16
        rounds = tuple(GenerationRound(0.004, 15 * 0.002, (0.002,) * 15) for _ in range(5))
        case.generation = Generation.from_dict({**GenerationFigures(
            batch_size=1, prompt_len=16, new_tokens=16, timing_method="host", rounds=rounds,
            warmup_rounds=1, kv_cache_bytes=1000, weight_bytes_per_step=10_000,
            cache_bytes_per_step=100).to_dict(), "tokens_hash": tokens_hash, **validity})
        return _forged(_line(record))

    forged = line("ef" * 32, tokens_reference_hash="ef" * 32)
    assert "not the one accelbench ships" in forged.invalid
    assert line(shipped["hash"], tokens_reference_hash=shipped["hash"]).invalid == ""
    assert line("ef" * 32, seed=7).invalid == ""  # no reference shipped for seed 7
