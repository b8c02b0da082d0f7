"""Issue 28 item 5: tokens that prove the run. The fp64 CPU reference's greedy tokens for the
built-in decoders ship with hashes (reference/expected_tokens.json, written by
scripts/expected_tokens.py); every generation result carries its tokens' hash and whether it
matches (exactly, or the first differing position); a shared line whose tokens do not match is
marked."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from accelbench.reference.expected_tokens import (
    EXPECTED_FILE,
    TokenKey,
    expected,
    first_difference,
    token_check,
    tokens_hash,
)
from accelbench.results import RunRecord
from accelbench.sharing.build import build_bundle

REPO = Path(__file__).resolve().parents[2]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("expected_tokens_script",
                                                  REPO / "scripts" / "expected_tokens.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_regenerates_a_shipped_entry() -> None:
    script = _script()
    shipped = json.loads(EXPECTED_FILE.read_text())
    assert shipped["made_by"] == "scripts/expected_tokens.py"
    pairs = {(e["workload"], e["size"]) for e in shipped["entries"]}
    assert pairs == set(script.SHIPPED)
    one = next(e for e in shipped["entries"] if (e["workload"], e["size"], e["prompt_len"],
                                                 e["new_tokens"]) == ("llama-1b", "tiny", 64, 64))
    again = script.entry("llama-1b", "tiny", 64, 64)
    assert again == one and again["hash"] == tokens_hash(again["tokens"])
    # every protocol test and the default lengths of each shipped model have an entry
    for workload, size in script.SHIPPED[:3]:
        from accelbench.workloads.catalogue import get_workload_class

        context = get_workload_class(workload)(size).context_length()
        for prompt, new in script.lengths(workload, context):
            version = get_workload_class(workload).version
            key = TokenKey(workload, version, size, 0, 1, prompt, new)
            assert expected(key) is not None, (workload, prompt)


def test_a_result_says_whether_its_tokens_are_the_references() -> None:
    key = TokenKey("llama-1b", 2, "tiny", 0, 1, 64, 64)  # version 2: the tiny weights are 1's
    reference = expected(key)["tokens"]  # type: ignore[index]
    assert token_check(key, reference)["match"] == "exact"
    changed = [list(reference[0])]
    changed[0][5] = (changed[0][5] + 1) % 512
    found = token_check(key, changed)
    assert found["match"] == "differs" and found["first_difference"] == 5
    assert found["expected_hash"] == tokens_hash(reference) != found["hash"]
    other = TokenKey("hf:gpt2", 1, "tiny", 0, 1, 64, 64)
    assert token_check(other, reference)["match"] == "no reference shipped"
    assert first_difference([[1, 2, 3]], [[1, 2]]) == 2 and first_difference([[1]], [[1]]) is None


def test_a_run_carries_its_hash_and_a_mismatching_shared_line_is_marked(cli, tmp_path: Path) -> None:
    """fp32 on the CPU follows the fp64 reference on the tiny decoders: "exact". The same result
    with its tokens' hash forged is marked when shared (sharing/plausible.py reads the facts)."""
    out = tmp_path / "r.json"
    done = cli("run", "llama-1b", "--mode", "generate", "--precision", "fp32", "--device", "cpu",
               "--size", "tiny", "--steps", "1", "--isolation", "none", "--output", str(out))
    assert done.returncode == 0, done.stderr
    record = RunRecord.from_dict(json.loads(out.read_text()))
    (case,) = record.cases
    generation = case.generation
    assert generation is not None and generation.tokens is not None
    assert generation.tokens.match == "exact" and generation.tokens_match is True
    assert generation.tokens_hash == generation.tokens_reference_hash
    assert "tokens match" in done.stdout
    from accelbench.sharing.plausible import implausible

    (line,) = [json.loads(text) for text in build_bundle([record], "a" * 32).lines]
    assert line["validity"]["tokens_hash"] == generation.tokens_hash
    assert implausible(line) == ""
    generation.tokens_hash, generation.tokens_match = "0" * 64, False
    (forged,) = [json.loads(text) for text in build_bundle([record], "a" * 32).lines]
    assert "do not match the reference" in implausible(forged)
