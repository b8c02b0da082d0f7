"""Issue 28 "done when": the CUDA and MPS paths of quantized decode run under the hardware
personalities (tests/personalities: the ampere GPU runs CUDA's tinygemm int4 product, which takes
bfloat16 activations only; the MPS GPU its own int4 product and an int8 kernel that asks for
multiples of 32), whole commands end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.mark.parametrize(("personality", "device", "int4_kernel"),
                         [("ampere", "cuda", "aten._weight_int4pack_mm (tinygemm)"),
                          ("mps", "mps", "aten._weight_int4pack_mm")])
def test_quantized_generation_runs_on_the_device_path(personality: str, device: str, int4_kernel: str,
                                                      cli, personality_env, tmp_path: Path) -> None:
    env, _ = personality_env(personality)
    out = tmp_path / "r.json"
    done = cli("run", "gpt2", "--mode", "generate", "--prompt-len", "4", "--new-tokens", "4",
               "--precision", "int8-wo,int4-wo", "--device", device, "--size", "tiny", "--steps", "1",
               "--warmup", "0", "--isolation", "none", "--output", str(out), env=env)
    assert done.returncode == 0, done.stderr
    cases = {c["precision"]: c for c in json.loads(out.read_text())["cases"]}
    assert all(c["status"] == "ok" for c in cases.values()), [c["error"] for c in cases.values()]
    assert cases["int4-wo"]["generation"]["quantization"]["kernel"] == int4_kernel
    assert cases["int4-wo"]["generation"]["quantization"]["kept"] == {}
    assert cases["int4-wo"]["generation"]["weight_bytes_per_step"] \
        < cases["int8-wo"]["generation"]["weight_bytes_per_step"]
    assert cases["int4-wo"]["device"].startswith(device)


def test_the_device_paths_compute_what_the_cpu_does(cli, personality_env, tmp_path: Path) -> None:
    """The same quantized model on the emulated CUDA and on the CPU: the same verdict and logit
    difference (the personality's tinygemm computes the kernel's definition)."""
    found = {}
    for device, env in (("cpu", None), ("cuda", personality_env("ampere")[0])):
        out = tmp_path / f"{device}.json"
        done = cli("check", "gpt2", "--mode", "generate", "--precision", "int4-wo", "--device", device,
                   "--size", "tiny", "--prompt-len", "4", "--new-tokens", "4", "--isolation", "none",
                   "--output", str(out), env=env)
        assert done.returncode == 0, done.stderr
        (case,) = json.loads(out.read_text())["cases"]
        found[device] = case["generation"]["parity"]
    assert found["cuda"]["verdict"] == found["cpu"]["verdict"]
    assert found["cuda"]["max_logit_diff"] == pytest.approx(found["cpu"]["max_logit_diff"], rel=1e-2)
