"""Issue 33, "an honest diagnosis on every generation row": each generation row's decode bound
(overhead- or bandwidth-bound against its floor, with the host CPU), its execution recipe (compile
mode, CUDA graphs) and its quantized kernel reach every surface: the run table, --json, compare,
compare --published, a shared bundle line, placement among peers and the site. An overhead-bound
line is compared only with lines of the same host CPU model (another host's are set aside, counted
and said), and a row that is not the published compiled/CUDA-graph recipe says so beside it.

Two sources of real results: a real H100 run (tests/data/decode_bound: llama-1b under --protocol
gpt-fast, compiled with CUDA graphs; bf16 read 59% of the measured bandwidth, int4-wo was 4x its
floor: overhead-bound; trimmed from the device runs of this issue) and a real tiny CPU run here
(eager, fp32 and int8-wo on PyTorch's reference kernel, overhead-bound). "Another host" is the
H100 result with its host CPU renamed, as the same work measured from another machine."""

from __future__ import annotations

import copy
import html
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import rendered_text

from accelbench.compare import NOT_COMPARABLE, LabelledRun, compare_runs
from accelbench.compare.decode_diagnosis import BANDWIDTH, OVERHEAD, REFERENCE_INT8, DecodeDiagnosis
from accelbench.reference.published import GRAPH_RECIPE, LLAMA_CPP_RECIPE
from accelbench.render.compare_table import comparison_renderable
from accelbench.render.generation_table import generation_notes, generation_table
from accelbench.render.json_views import comparison_json, peers_view, record_view
from accelbench.render.peers_table import peers_renderable
from accelbench.render.published_generation import published_rows
from accelbench.render.site import render_site
from accelbench.results import RunRecord
from accelbench.sharing.against import compare_against
from accelbench.sharing.build import build_bundle
from accelbench.sharing.bundle import dump_line, parse_line
from accelbench.sharing.peer_view import peer_of

DATA = Path(__file__).parents[1] / "data" / "decode_bound" / "h100-llama-1b-gpt-fast.json"
XEON = "Intel(R) Xeon(R) Processor"
EPYC = "AMD EPYC 9654 96-Core Processor"
RECIPE = "inductor:reduce-overhead, CUDA graphs captured"


def _h100(run_id: str = "h100issue33") -> RunRecord:
    record = RunRecord.from_dict(json.loads(DATA.read_text()))
    record.run_id = run_id
    return record


def _from_host(cpu: str, run_id: str) -> RunRecord:
    """The H100 result as measured from another host CPU: its stored words name that CPU."""
    record = _h100(run_id)
    record.environment = copy.deepcopy(record.environment)
    record.environment["devices"]["cpu"]["name"] = cpu
    for case in record.cases:
        generation = case.generation
        assert generation is not None and generation.decode_bound_words is not None
        case.generation = replace(generation, host_cpu=cpu,
                                  decode_bound_words=generation.decode_bound_words.replace(XEON, cpu))
    return record


_text = rendered_text


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    """A real eager decode on this CPU: fp32 and int8-wo (PyTorch's reference int8 kernel)."""
    home = tmp_path_factory.mktemp("tiny-home")
    out = home / "tiny.json"
    done = subprocess.run([sys.executable, "-m", "accelbench", "run", "gpt2", "--mode", "generate",
                           "--size", "tiny", "--device", "cpu", "--precision", "fp32,int8-wo", "--steps",
                           "2", "--warmup", "0", "--quiet", "-o", str(out)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "ACCELBENCH_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    return RunRecord.from_dict(json.loads(out.read_text()))


def test_the_stored_bounds_are_the_judge_s_own_words() -> None:
    from accelbench.devices.quantized import _INT8
    from accelbench.measure.generation import decode_bytes

    assert (OVERHEAD, BANDWIDTH) == (decode_bytes.OVERHEAD, decode_bytes.BANDWIDTH)
    assert all(REFERENCE_INT8 in kernel.name for kernel in _INT8.values())


def test_the_run_table_and_its_json_say_the_bound_recipe_and_kernel(tiny: RunRecord) -> None:
    h100 = _h100()
    bf16, int4 = h100.cases
    table, notes = _text(generation_table(h100)), "\n".join(generation_notes(h100))
    assert "bw-bound" in table and "overhead" in table and "compile:inductor:reduce-overhead +graphs" in table
    assert f"overhead-bound (host launches, {XEON}): 4x the bandwidth floor" in notes
    assert "bandwidth-bound: 59% of measured bandwidth" in notes
    views = record_view(h100)["cases"]
    assert views[0]["decode"]["decode_bound"] == BANDWIDTH and views[1]["decode"]["decode_bound"] == OVERHEAD
    assert views[1]["decode"]["host_cpu"] == XEON and views[0]["decode"]["recipe"] == RECIPE
    assert views[1]["decode"]["kernel"] == "aten._weight_int4pack_mm (tinygemm)"
    assert bf16.generation is not None
    assert views[0]["decode"]["decode_floor_ratio"] == bf16.generation.decode_floor_ratio
    assert views[0]["key"]["compile_backend"] == "inductor:reduce-overhead"
    eager = record_view(tiny)["cases"]
    assert [v["decode"]["decode_bound"] for v in eager] == [OVERHEAD, OVERHEAD]  # a tiny model on a CPU
    assert [v["decode"]["recipe"] for v in eager] == ["eager", "eager"]
    assert REFERENCE_INT8 in eager[1]["decode"]["kernel"]
    assert int4.generation is not None and int4.generation.decode_bound == OVERHEAD


def test_a_shared_line_carries_the_diagnosis_and_an_older_line_still_loads(tiny: RunRecord) -> None:
    lines = [parse_line(text) for text in build_bundle([_h100(), tiny], "a" * 32).lines]
    bf16, int4, fp32, int8 = lines
    assert bf16["key"]["compile_backend"] == "inductor:reduce-overhead"
    assert bf16["decode"]["decode_bound"] == BANDWIDTH and int4["decode"]["decode_bound"] == OVERHEAD
    assert int4["decode"]["host_cpu"] == XEON and XEON in int4["decode"]["decode_bound_words"]
    assert int4["decode"]["execution"]["cuda_graphs"] == "captured (CUDA graphs)"
    assert int4["decode"]["kernel"] == "aten._weight_int4pack_mm (tinygemm)"
    assert "kernel" not in bf16["decode"]
    assert int8["decode"]["execution"]["decode"] == "eager" and REFERENCE_INT8 in int8["decode"]["kernel"]
    assert int4["figures"]["decode_floor_ratio"] == pytest.approx(4.0, abs=0.6)
    peers = [peer_of(line) for line in lines]
    assert [p.decode.bound for p in peers if p and p.decode] == [BANDWIDTH, OVERHEAD, OVERHEAD, OVERHEAD]
    diagnosis = peers[1].decode if peers[1] else None
    assert diagnosis is not None and diagnosis.floor_ratio == int4["figures"]["decode_floor_ratio"]
    assert tiny.cases[0].generation is not None
    assert fp32["decode"]["host_cpu"] == tiny.cases[0].generation.host_cpu
    # A line shared before the section existed: read as not judged, compared as before.
    old = {name: value for name, value in int4.items() if name not in ("decode", "hash", "bundle")}
    reread = peer_of(parse_line(dump_line(old)))
    assert reread is not None and reread.decode is None and reread.throughput == peers[1].throughput


def test_compare_holds_an_overhead_bound_pair_to_one_host_cpu() -> None:
    a, other, same = _h100("runa"), _from_host(EPYC, "runb"), _h100("runc")
    (group,) = compare_runs([LabelledRun("A", a), LabelledRun("B", other)])
    by_precision = {pair.a.precision: pair.verdict for pair in group.pairs}
    assert by_precision["int4-wo"].verdict == NOT_COMPARABLE
    assert EPYC in by_precision["int4-wo"].reason and XEON in by_precision["int4-wo"].reason
    assert by_precision["bf16"].verdict != NOT_COMPARABLE  # both bandwidth-bound: hosts do not matter
    (group,) = compare_runs([LabelledRun("A", a), LabelledRun("C", same)])
    assert all(pair.verdict.verdict != NOT_COMPARABLE for pair in group.pairs)
    comparisons = compare_runs([LabelledRun("A", a), LabelledRun("B", other)])
    text = " ".join(_text(comparison_renderable(comparisons)).split())
    assert "bw-bound 59%" in text
    assert f"overhead-bound ({XEON})" in text and f"overhead-bound ({EPYC})" in text
    assert "not comparable: overhead-bound decode (host launches) driven by another host CPU" in text
    assert f"CUDA graphs: captured (CUDA graphs); overhead-bound (host launches, {EPYC})" in text
    judged = json.loads(comparison_json(comparisons))["comparisons"][0]
    (pair,) = [p for p in judged["pairs"] if p["b_case"]["key"]["precision"] == "int4-wo"]
    assert pair["verdict"]["verdict"] == NOT_COMPARABLE and EPYC in pair["verdict"]["reason"]
    assert pair["b_case"]["decode"]["host_cpu"] == EPYC and pair["a_case"]["decode"]["recipe"] == RECIPE


def test_compare_published_says_when_a_row_is_not_the_published_recipe(tiny: RunRecord, cli,
                                                                       tmp_path: Path) -> None:
    rows = published_rows([("h100", _h100()), ("tiny", tiny)])
    mine = [row for row in rows if row[0] != "published"]
    bf16, int4, fp32, int8 = (row[-1] for row in mine)
    assert bf16 == f"{RECIPE}; bandwidth-bound: 59% of measured bandwidth"
    # The compile mode first, then, in the same line, why it is not the published recipe.
    assert int4.startswith(f"{RECIPE}; NOT the published rows' recipe (compiled, CUDA graphs): "
                           f"overhead-bound (host launches, {XEON})")
    assert fp32.startswith("eager; NOT the published rows' recipe") and "eager decode" in fp32
    assert "overhead-bound" in fp32 and "reference int8 kernel" not in fp32
    assert "eager decode" in int8 and f"PyTorch's reference int8 kernel (aten.{REFERENCE_INT8})" in int8
    published = [row for row in rows if row[0] == "published"]
    assert {row[-1] for row in published if row[2].startswith(("gpt-fast", "PyTorch CI"))} == {GRAPH_RECIPE}
    assert all(row[-1] == LLAMA_CPP_RECIPE for row in published if row[2].startswith("llama.cpp"))
    done = cli("compare", "--published", "--json", str(DATA))
    assert done.returncode == 0, done.stderr
    views = [row for row in json.loads(done.stdout)["published"] if row["whose"] != "published"]
    assert [v["decode"]["decode_bound"] for v in views] == [BANDWIDTH, OVERHEAD]
    assert views[0]["unlike_published"] == [] and views[1]["unlike_published"] == [
        f"overhead-bound (host launches, {XEON}): 4x the bandwidth floor"]
    shown = cli("compare", "--published", str(DATA))
    assert shown.returncode == 0 and "NOT the published rows' recipe" in " ".join(shown.stdout.split())


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five machines of the H100's host CPU model and two of another, each sharing the same work."""
    folder = tmp_path_factory.mktemp("shared")
    for index in range(7):
        record = _h100(f"peer{index}") if index < 5 else _from_host(EPYC, f"peer{index}")
        (folder / f"{index}.jsonl").write_text(build_bundle([record], f"{index + 1:032x}").text())
    return folder


def test_placement_sets_another_host_s_overhead_bound_lines_aside(shared: Path) -> None:
    comparisons, loaded = compare_against([("mine", _h100())], [str(shared)], lambda message: None)
    assert not loaded.skipped and loaded.lines == 14
    bf16, int4 = (c.placement for c in comparisons)
    assert int4.set_aside == 2 and int4.machine_count == 5 and int4.verdict == "normal"
    assert int4.set_aside_reasons == [f"overhead-bound decode (host launches) driven by another host CPU: "
                                      f"{EPYC} against {XEON}"]
    assert bf16.set_aside == 0 and bf16.machine_count == 7  # bandwidth-bound lines of either host
    text = " ".join(_text(peers_renderable(comparisons)).split())
    assert f"yours overhead-bound (host launches, {XEON}): 4x the bandwidth floor" in text
    assert f"2 result(s) of this work set aside, not comparable: overhead-bound decode (host launches) " \
           f"driven by another host CPU: {EPYC}" in text
    placed = peers_view(comparisons, loaded)["placements"]
    assert [p["set_aside"] for p in placed] == [0, 2] and placed[1]["decode"]["decode_bound"] == OVERHEAD


def test_the_site_names_recipe_and_bound_and_pools_overhead_bound_lines_per_host(shared: Path) -> None:
    peers = [peer for path in sorted(shared.glob("*.jsonl")) for text in path.read_text().splitlines()
             if (peer := peer_of(parse_line(text))) is not None]
    pages = {name: html.unescape(page) for name, page in render_site(peers).items()}
    int4 = next(page for name, page in pages.items() if name.startswith("bench-llama-1b-generate-int4"))
    bf16 = next(page for name, page in pages.items() if name.startswith("bench-llama-1b-generate-bf16"))
    assert "compile:inductor:reduce-overhead" in int4 and "<th>execution</th><th>decode bound</th>" in int4
    assert int4.count("NVIDIA H100 80GB HBM3</a>") == 2  # a row per host CPU model
    assert f"overhead-bound (host launches, {XEON}): median 4x the bandwidth floor" in int4
    assert f"overhead-bound (host launches, {EPYC}): median 4x the bandwidth floor" in int4
    assert "5 (5 machines)" in int4 and "2 (2 machines)" in int4 and RECIPE in int4
    assert bf16.count("NVIDIA H100 80GB HBM3</a>") == 1 and "7 (7 machines)" in bf16
    assert "bandwidth-bound: median 59% of measured bandwidth" in bf16
    device = next(page for name, page in pages.items() if name.startswith("device-nvidia-h100"))
    assert device.count("overhead-bound (host launches") == 2 and "bandwidth-bound: median 59%" in device


def test_a_diagnosis_without_a_recorded_recipe_is_never_taken_for_the_published_one() -> None:
    old = DecodeDiagnosis.of_generation({"decode_bound": BANDWIDTH, "decode_floor_ratio": 1.2})
    assert old is not None and old.unlike_published() == [
        "its execution was not recorded (a result from before the recipe was kept)"]
    assert DecodeDiagnosis.of_generation({"ttft_s": 0.1}) is None
