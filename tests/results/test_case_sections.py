"""A case's sections (``generation``, ``sustained``, ``break_even``, ``start``) are typed records
(issue 35): read by attribute everywhere, written to the file as they always were, and read back
leniently from files of other versions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accelbench.measure.generation.quantization import Quantization, settings_words
from accelbench.results import CaseResult, RunRecord
from accelbench.results.first_use import Start
from accelbench.results.generation import Generation, TokenParity
from accelbench.results.schema import SCHEMA_VERSION

SRC = Path(__file__).resolve().parents[2] / "src" / "accelbench"
DATA = Path(__file__).resolve().parents[1] / "data"
SECTIONS = ("generation", "sustained", "break_even", "start")
#: A section read by key: ``case.generation["ttft_s"]``, ``.get("protocol")``, ``(case.generation
#: or {})``, ``"noisy" in case.generation``.
_BY_KEY = re.compile(r"\.(?P<name>{0})\s*(\[|\.get\(|\.update\(|or \{{\}})|in [\w.]*\.({0})\b"
                     .format("|".join(SECTIONS)))


def _file(case: dict[str, object]) -> dict[str, object]:
    return {"schema_version": SCHEMA_VERSION, "run_id": "r", "created_at": "2026-11-27T00:00:00+00:00",
            "accelbench_version": "0", "cases": [case]}


def _reads_by_key(paths: list[Path]) -> list[str]:
    return [f"{path.relative_to(SRC)}:{number}: {line.strip()}"
            for path in paths for number, line in enumerate(path.read_text().splitlines(), 1)
            if _BY_KEY.search(line)]


def test_the_scan_sees_a_read_by_key() -> None:
    assert _BY_KEY.search('rate = case.generation["decode_tokens_per_s_total"]')
    assert _BY_KEY.search('figures = (case.generation or {}).get("ttft_s")')
    assert _BY_KEY.search('steps = case.break_even.get("steps")')
    assert _BY_KEY.search('if "noisy" in case.generation:')
    assert not _BY_KEY.search("rate = case.generation.decode_tokens_per_s_total")


def test_render_reads_no_case_section_by_key() -> None:
    assert _reads_by_key(sorted((SRC / "render").rglob("*.py"))) == []


def test_no_case_section_is_read_by_key_outside_the_codec() -> None:
    """Every layer that holds a case (results and above; measure/ sits below them, and its
    roofline keeps held peaks of its own in a dict named ``sustained``)."""
    paths = [p for p in sorted(SRC.rglob("*.py")) if "measure" not in p.relative_to(SRC).parts]
    assert _reads_by_key(paths) == []


def test_a_stored_generation_section_reads_back_and_writes_the_same() -> None:
    """The H100 record: every key and value of each generation section, the nested ones (the
    protocol, torchao's quantization, the tokens, the execution) included, comes back as it was."""
    data = json.loads((DATA / "decode_bound" / "h100-llama-1b-gpt-fast.json").read_text())
    record = RunRecord.from_dict(data)
    for stored, case in zip(data["cases"], record.cases, strict=True):
        assert isinstance(case.generation, Generation)
        assert json.loads(json.dumps(case.to_dict()))["generation"] == stored["generation"]
    int4 = record.cases[1].generation
    assert int4 is not None and int4.quantization is not None and int4.protocol is not None
    assert int4.protocol.figure == "decode" and int4.decode_bound == "overhead"


def test_absent_sections_stay_absent_and_unknown_keys_are_skipped() -> None:
    """A check's section holds its parity alone; a case without decode steps has no bound; a key
    no field holds (a newer file's) is skipped, counted, not kept."""
    parity = Generation(parity=TokenParity("pass", "fp32", {"pass": 1e-3, "drift": 1e-2}, 4))
    assert list(parity.to_dict()) == ["parity"]
    unjudged = Generation.from_dict({"ttft_s": 0.1, "bandwidth_share": None,
                                     "bandwidth_reference_bytes_per_s": None,
                                     "bandwidth_verdict": "no decode steps"})
    written = unjudged.to_dict()
    assert written["bandwidth_verdict"] == "no decode steps" and written["tpot_s"] is None
    assert "decode_bound" not in written and "host_cpu" not in written and "protocol" not in written
    case = CaseResult(workload="gpt2", mode="generate", device="cpu", batch_size=1,
                      generation=unjudged, start=Start(1)).to_dict()
    case["generation"]["from_a_newer_version"] = 1
    record = RunRecord.from_dict(_file(case))
    (loaded,) = record.cases
    assert loaded.generation == unjudged and loaded.start == Start(1)
    assert "from_a_newer_version" not in loaded.to_dict()["generation"]
    assert loaded.to_dict()["start"]["warm"] is True  # what the fields say, written beside them


def test_a_section_of_the_wrong_shape_is_named_by_its_path() -> None:
    case = CaseResult(workload="gpt2", mode="generate", device="cpu", batch_size=1).to_dict()
    case["generation"] = {"protocol": {"name": "llama-bench", "test": "pp512", "rounds": "five"}}
    with pytest.raises(ValueError, match=r"cases\[0\]\.generation\.protocol\.rounds"):
        RunRecord.from_dict(_file(case))


def test_the_quantization_section_has_torchao_s_keys_only_where_torchao_quantized() -> None:
    """The record the quantizers build (measure/generation/quantization.py) is the one the file
    keeps: the in-house kernels' without torchao's keys, torchao's with them, an inductor setting
    that is not plain data by its repr, and the settings as set (applied around the case's run)
    not at all; read back as written."""
    in_house = Quantization("int8-wo", kernel="int8 kernel", quantized_layers=3)
    assert set(Generation(quantization=in_house).to_dict()["quantization"]).isdisjoint(
        {"library_version", "config", "inductor_settings", "applied_settings"})
    settings = {"coordinate_descent_tuning": True, "max_autotune_gemm_backends": ("ATEN", "TRITON")}
    torchao = Quantization("int8-wo-torchao", library="torchao", library_version="0.14",
                           config="Int8WeightOnlyConfig()", inductor_settings=settings_words(settings),
                           applied_settings=settings)
    written = json.loads(json.dumps(Generation(quantization=torchao).to_dict()))["quantization"]
    assert written["inductor_settings"] == {"coordinate_descent_tuning": True,
                                            "max_autotune_gemm_backends": "('ATEN', 'TRITON')"}
    assert (written["library_version"], written["config"]) == ("0.14", "Int8WeightOnlyConfig()")
    assert "applied_settings" not in written
    back = Generation.from_dict({"quantization": written})
    assert back.quantization == torchao and back.to_dict()["quantization"] == written
    assert back.quantization is not None and back.quantization.applied_settings == {}
