"""Issue 28 item 6: the published language-model rows (llama.cpp's Apple-silicon and CUDA tables,
gpt-fast, torchao, PyTorch CI's gpt-fast targets) are in the reference table with their sources,
and ``compare --published`` shows them beside a run's generation cases with the bandwidth share
as the comparable figure; ``share --protocol`` shares a protocol's cases only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.measure.generation.rounds import GenerationFigures, GenerationRound
from accelbench.reference.published import APPLE_CHIPS, DECODE_REFERENCES, decode_references
from accelbench.render.published_generation import published_rows
from accelbench.results import CaseResult, RunRecord
from accelbench.results.generation import Generation


def test_the_rows_are_the_documents_with_sources() -> None:
    m1 = [r for r in DECODE_REFERENCES if r.device == "Apple M1 (GPU, Metal)"]
    assert {(r.quantization, r.test): r.tokens_per_s for r in m1} == {
        ("Q8_0", "tg128"): 7.91, ("Q4_0", "pp512"): 117.96, ("Q4_0", "tg128"): 14.15}
    q4 = next(r for r in m1 if r.test == "tg128" and r.quantization == "Q4_0")
    assert q4.bandwidth_share == pytest.approx(14.15 * 3.83e9 / 68e9)  # 80%: "70-85% on base chips"
    assert next(c for c in APPLE_CHIPS if c.chip == "M1").bandwidth_bytes_per_s[1] == 68e9
    gpt_fast = {r.quantization: r for r in DECODE_REFERENCES if r.runtime.startswith("gpt-fast")}
    assert gpt_fast["bf16"].tokens_per_s == 104.9 and gpt_fast["bf16"].achieved == 1397e9
    assert gpt_fast["int4 weight-only (group 32)"].precision == "int4-wo"
    ci = [r for r in DECODE_REFERENCES if r.runtime.startswith("PyTorch CI")]
    assert [(r.tokens_per_s, r.achieved) for r in ci] == [(94, 1253e9), (144, 957e9)]
    assert all(r.source.address.startswith("https://") for r in DECODE_REFERENCES)
    # a row with no stated bandwidth has no share, rather than a guessed one
    h100 = next(r for r in DECODE_REFERENCES if r.device == "NVIDIA H100" and r.test == "decode")
    assert h100.bandwidth_share is None
    assert {r.precision for r in decode_references("int8-wo")} == {"int8-wo"}
    assert decode_references("fp16") == decode_references("bf16")


def _generation_record(precision: str) -> RunRecord:
    rounds = tuple(GenerationRound(0.01, 0.7) for _ in range(3))
    figures = GenerationFigures(batch_size=1, prompt_len=1, new_tokens=8, timing_method="host",
                                rounds=rounds, warmup_rounds=1, kv_cache_bytes=1,
                                weight_bytes_per_step=5_000_000, cache_bytes_per_step=0)
    case = CaseResult(workload="llama-1b", mode="generate", device="mps:0", batch_size=1, prompt_len=1,
                      new_tokens=8, precision=precision, device_name="Apple M2",
                      generation=Generation.from_dict({**figures.to_dict(), "bandwidth_share": 0.61}))
    return RunRecord("mine0001", "2026-11-26T00:00:00+00:00", "0.1.0", cases=[case])


def test_a_run_reads_beside_the_published_rows_of_its_precision() -> None:
    rows = published_rows([("mine", _generation_record("int4-wo"))])
    assert rows[0][0] == "yours: mine" and rows[0][3] == "int4-wo" and rows[0][7] == "61%"
    published = rows[1:]
    assert published and all(row[0] == "published" for row in published)
    assert {row[3].split(" (")[0] for row in published} <= {"Q4_0", "int4 weight-only"}
    assert any(row[1] == "Apple M2 (GPU, Metal)" and row[7] == "84%" for row in published)


def test_compare_published_and_share_protocol(cli, tmp_path: Path) -> None:
    record = _generation_record("int8-wo")
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(record.to_dict()))
    done = cli("compare", "--published", str(path))
    assert done.returncode == 0, done.stderr
    assert "published" in done.stdout and "int8 weight-only" in done.stdout and "61%" in done.stdout
    assert cli("compare", "--published").returncode == 0
    train = CaseResult(workload="mnist", mode="train", device="cpu", batch_size=64)
    plain = tmp_path / "train.json"
    plain.write_text(json.dumps(RunRecord("train001", "2026-11-26T00:00:00+00:00", "0.1.0",
                                          cases=[train]).to_dict()))
    refused = cli("compare", "--published", str(plain))
    assert refused.returncode == 2 and "generation cases" in refused.stderr
    from accelbench.cli.share import protocol_cases

    record.cases.append(CaseResult(workload="llama-1b", mode="generate", device="cpu", batch_size=1,
                                   prompt_len=512, new_tokens=1, protocol="llama-bench"))
    (kept,) = protocol_cases([record], "llama-bench")
    assert [c.protocol for c in kept.cases] == ["llama-bench"]
    from accelbench.errors import UsageError

    with pytest.raises(UsageError, match="allowed: llama-bench"):
        protocol_cases([record], "llamabench")
