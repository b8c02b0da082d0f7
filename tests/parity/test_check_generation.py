"""Issue 28 item 4: quality beside speed. ``check --mode generate --precision int4-wo`` gives the
first position where the quantized model's greedy tokens leave the bf16 path's and the fp64
reference's, the teacher-forced top-1 agreement, and the largest logit difference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from accelbench.parity.quantized import agreement, describe_quality


def test_agreement_is_teacher_forced_so_one_early_difference_hides_nothing() -> None:
    tokens = torch.tensor([[3, 1, 2, 0]])
    logits = torch.nn.functional.one_hot(tokens, 5).double() * 4.0  # the side's own argmax
    forced = logits.clone()
    forced[0, 1] = torch.tensor([0, 0, 0, 5.0, 0])  # the quantized model prefers 3 at position 1
    quantized_tokens = torch.tensor([[3, 3, 4, 4]])  # its own run went elsewhere from there on
    found = agreement(quantized_tokens, forced, tokens, logits)
    assert found["first_difference"] == 1
    assert found["top1_agreement"] == pytest.approx(3 / 4)  # fed the side's tokens, 3 of 4 agree
    assert found["max_logit_diff"] == pytest.approx(5 / 4) and found["max_logit_diff_position"] == 1
    text = describe_quality({"against_bf16": found, "against_reference": found, "reference": "cpu-fp64"})
    assert "leaves the bf16 path's tokens at position 1, top-1 agreement 75.0%" in text


def test_check_reports_what_int4_costs(cli, tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    done = cli("check", "llama-1b", "--mode", "generate", "--precision", "int4-wo", "--device", "cpu",
               "--size", "tiny", "--prompt-len", "8", "--new-tokens", "8", "--isolation", "none",
               "--output", str(out))
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    parity = case["generation"]["parity"]
    quality = parity["quality"]
    for side in ("against_bf16", "against_reference"):
        assert set(quality[side]) >= {"first_difference", "top1_agreement", "max_logit_diff"}
        assert 0 <= quality[side]["top1_agreement"] <= 1 and quality[side]["positions"] == 8
    assert quality["reference"] == "cpu-fp64" and parity["verdict"] in ("pass", "drift", "diverged")
    assert "top-1 agreement" in done.stdout and "the bf16 path" in done.stdout


def test_a_device_without_an_int4_kernel_is_unsupported(cli, personality_env, tmp_path: Path) -> None:
    """An MPS whose build lacks the int4 kernel (an old macOS): "unsupported" with the device's own
    words, never a crash; int8 runs on."""
    env, _ = personality_env("mps", ACCELBENCH_PERSONALITY_MPS_MISSING="_weight_int4pack_mm")
    out = tmp_path / "r.json"
    done = cli("run", "llama-1b", "--mode", "generate", "--precision", "int8-wo,int4-wo", "--device",
               "mps", "--size", "tiny", "--prompt-len", "4", "--new-tokens", "4", "--steps", "1",
               "--isolation", "none", "--output", str(out), env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr  # a case not ok
    cases = {c["precision"]: c for c in json.loads(out.read_text())["cases"]}
    assert cases["int8-wo"]["status"] == "ok"
    assert cases["int4-wo"]["status"] == "unsupported"
    assert "not currently implemented for the MPS device" in cases["int4-wo"]["error"]
