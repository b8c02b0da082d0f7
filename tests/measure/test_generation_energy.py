"""A generation case's energy (issue 33): measured over its timed rounds only (not the warm-up,
not the one-token byte count), stored as J/token and J/round in the result's ``energy`` record,
shown under the run's tables and in ``--json``; where no source reads, the same n/a reason a train
case gives. The catalogue lists no generation figure that a generation case never measures.

The energy source is RAPL's own reader (measure/trackers/energy.RaplSource) on a powercap folder
the test writes, its counter advanced 1 J by every prefill and decode step the workload runs: the
joules then count the model calls inside the window."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelbench.devices import DeviceSet
from accelbench.engine.case import plan
from accelbench.engine.measure_case import run_case
from accelbench.measure.trackers import energy as energy_module
from accelbench.measure.trackers.energy import RaplSource, generation_energy_figures
from accelbench.options import RunOptions, StopRule
from accelbench.render.json_views import record_view
from accelbench.render.table import energy_lines
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import FIGURES, case_figures
from accelbench.workloads.catalogue import get_workload_class

WORKLOAD = "nanogpt-char"
BATCH, PROMPT, NEW_TOKENS, ROUNDS = 2, 8, 4, 3
#: Generation figures measured only under a flag this plain, uncompiled case does not give: what
#: each needs. Any other figure listed for "generate" must be present, or (energy) say why not.
CONDITIONAL = {
    **{name: "--protocol" for name in (
        "pp_tokens_per_s", "pp_tokens_per_s_sd", "tg_tokens_per_s", "tg_tokens_per_s_sd",
        "gpt_fast_tokens_per_s", "gpt_fast_bandwidth_bytes_per_s", "gpt_fast_bandwidth_share",
        "mlperf_ttft_s", "mlperf_token_rate")},
    "compile_s": "--compile", "break_even_steps": "--compile BACKEND,none",
}
ENERGY = ("joules_per_token", "joules_per_round")


def _options(mode: str = "generate", workload: str = WORKLOAD) -> RunOptions:
    lengths = {"prompt_lens": (PROMPT,), "new_tokens": (NEW_TOKENS,)} if mode == "generate" else {}
    return RunOptions(workloads=(workload,), modes=(mode,), size="tiny", batch_size=BATCH,
                      isolation="none", warmup_steps=1, stop=StopRule("steps", ROUNDS), **lengths)


def _run(mode: str = "generate", workload: str = WORKLOAD) -> CaseResult:
    options = _options(mode, workload)
    (case,) = plan(options, DeviceSet.current())
    result = run_case(case, options)
    assert result.ok, result.error
    return result


def _record(*cases: CaseResult) -> RunRecord:
    return RunRecord(run_id="energy", created_at="2026-01-01T00:00:00Z", accelbench_version="test",
                     cases=list(cases))


def _powercap(root: Path, microjoules: int) -> None:
    domain = root / "intel-rapl:0"
    domain.mkdir(parents=True, exist_ok=True)
    (domain / "name").write_text("package-0\n")
    (domain / "energy_uj").write_text(f"{microjoules}\n")
    (domain / "max_energy_range_uj").write_text("262143328850\n")


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CaseResult]:
    """A generation case whose RAPL counter moves 1 J per model call (prefill or decode step)."""
    root = tmp_path_factory.mktemp("powercap")
    _powercap(root, 0)
    calls = {"n": 0}
    workload = get_workload_class(WORKLOAD)

    def counted(original: Any) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(self, *args, **kwargs)
            calls["n"] += 1
            _powercap(root, calls["n"] * 1_000_000)
            return out
        return call

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(energy_module._SOURCES, "rapl", lambda device: RaplSource(root))
        patch.setattr(workload, "prefill", counted(workload.prefill))
        patch.setattr(workload, "decode_step", counted(workload.decode_step))
        result = _run()
    assert calls["n"] > ROUNDS * NEW_TOKENS  # the warm-up and the byte count ran calls too
    yield result


@pytest.fixture(scope="module")
def unmetered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CaseResult, CaseResult]]:
    """A generation case and a train case on a machine without RAPL (and, on Linux, without
    powermetrics)."""
    absent = tmp_path_factory.mktemp("no-powercap") / "powercap"
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(energy_module._SOURCES, "rapl", lambda device: RaplSource(absent))
        yield _run(), _run("train", "mnist")


def test_the_energy_window_holds_exactly_the_timed_rounds(metered: CaseResult) -> None:
    generation, energy = metered.generation, metered.energy
    assert generation is not None and generation.rounds is not None
    assert len(generation.rounds) == ROUNDS and (generation.warmup_rounds or 0) >= 1
    assert energy is not None and energy.source == "rapl" and energy.reason == ""
    # Each timed round is one prefill and N - 1 decode steps: N joules. The warm-up's rounds or
    # the byte count's one-token prefill and decode step inside the window would add to them.
    assert energy.joules == pytest.approx(ROUNDS * NEW_TOKENS)
    assert energy.joules_per_round == pytest.approx(NEW_TOKENS)
    assert energy.joules_per_token == pytest.approx(1 / BATCH)  # B x N output tokens a round
    # Per step and per epoch are a step case's; samples/J too.
    assert energy.joules_per_step is None and energy.samples_per_joule is None


def test_j_per_token_is_shown_under_the_tables_and_in_json(metered: CaseResult) -> None:
    record = _record(metered)
    assert energy_lines(record) == [
        f"energy {WORKLOAD} generate cpu: 0.5 J/token, {NEW_TOKENS} J/round (rapl)"]
    (case,) = json.loads(json.dumps(record_view(record)))["cases"]
    assert case["figures"]["joules_per_token"] == pytest.approx(1 / BATCH)
    assert case["figures"]["joules_per_round"] == pytest.approx(NEW_TOKENS)
    assert "joules_per_step" not in case["figures"]
    assert case["energy"]["joules_per_token"] == pytest.approx(1 / BATCH)
    # Read back from the stored form, the record keeps them.
    again = RunRecord.from_dict(record.to_dict())
    assert case_figures(again.cases[0])["joules_per_token"] == pytest.approx(1 / BATCH)


def test_without_a_source_a_generation_case_gives_the_reason_a_train_case_gives(
        unmetered: tuple[CaseResult, CaseResult]) -> None:
    generation, train = unmetered
    assert generation.energy is not None and train.energy is not None
    assert generation.energy.joules is None and generation.energy.joules_per_token is None
    assert generation.energy.reason == train.energy.reason
    assert generation.energy.reason.startswith("rapl: no RAPL interface")
    # A run of generation cases alone prints the line a train run prints.
    assert energy_lines(_record(generation)) == [f"energy n/a on cpu: {generation.energy.reason}"]
    assert energy_lines(_record(generation, train)) == energy_lines(_record(train))


def test_every_generation_figure_in_the_catalogue_is_measured_or_says_why(
        metered: CaseResult, unmetered: tuple[CaseResult, CaseResult]) -> None:
    listed = {figure.name for figure in FIGURES if "generate" in figure.modes}
    assert set(ENERGY) <= listed and "joules_per_step" not in listed
    assert set(CONDITIONAL) <= listed
    for case in (metered, unmetered[0]):
        figures = case_figures(case)
        assert set(figures) == listed
        for name, value in figures.items():
            if value is not None:
                continue
            if name in ENERGY:  # no source: the record says why
                assert case.energy is not None and case.energy.reason, name
                continue
            assert name in CONDITIONAL, f"{name} is listed for generate but this case has none"
    # With a source, only what a flag measures is missing.
    assert {n for n, v in case_figures(metered).items() if v is None} == set(CONDITIONAL)


def test_energy_per_round_and_token_without_a_reading_or_rounds() -> None:
    assert generation_energy_figures(None, 3, 8) == {"joules": None, "joules_per_round": None,
                                                     "joules_per_token": None}
    assert generation_energy_figures(6.0, 0, 8)["joules_per_token"] is None
    assert generation_energy_figures(6.0, 3, 4) == {"joules": 6.0, "joules_per_round": 2.0,
                                                    "joules_per_token": 0.5}


def test_the_run_prints_the_generation_cases_energy_or_its_reason(cli, tmp_path: Path) -> None:
    """The whole command, on whatever this machine has: J/token where a source reads, else the
    stored reason in the run's n/a line."""
    out = tmp_path / "run.json"
    done = cli("run", WORKLOAD, "--size", "tiny", "--device", "cpu", "--mode", "generate",
               "--prompt-len", str(PROMPT), "--new-tokens", str(NEW_TOKENS), "--steps", "2",
               "--warmup", "1", "-o", str(out))
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    energy = case["energy"]
    assert energy is not None
    text = " ".join(done.stdout.split())  # the line may wrap
    if energy["joules"] is not None:
        assert energy["joules_per_token"] > 0
        assert f"energy {WORKLOAD} generate cpu: {energy['joules_per_token']:.3g} J/token" in text
    else:
        assert energy["reason"] and energy["joules_per_token"] is None
        assert " ".join(f"energy n/a on cpu: {energy['reason']}".split()) in text
