"""Issue 26, item 18: compile time and break-even no longer depend on torch.compile's on-disk
caches (each compiled case compiles into a fresh, empty folder, and the result records the caches'
switches and any lookup that still hit); the break-even takes the uncompiled warm-up's own excess
off the compile time; a case that is not the first of its process is marked warm wherever its
first-use figures are shown; results written before load unchanged."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from accelbench.engine.cold_start import CaseStart
from accelbench.render.steady import first_use_cell, steady_rows
from accelbench.results import CaseResult, RunRecord
from accelbench.results.first_use import FRESH_CACHE, Start, break_even
from accelbench.results.pairs import compile_break_even


@pytest.fixture
def user_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's own inductor cache folder, as TORCHINDUCTOR_CACHE_DIR names it."""
    folder = tmp_path / "user-inductor-cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(folder))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    return folder


def test_a_compiled_case_compiles_into_a_fresh_folder_removed_after(user_caches: Path) -> None:
    from torch._inductor.runtime.cache_dir_utils import cache_dir, triton_cache_dir

    with CaseStart(compiled=True) as start:
        folder = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
        assert folder != user_caches and folder.is_dir() and not any(folder.iterdir())
        assert Path(cache_dir()) == folder  # what inductor writes to, during the case
        assert Path(triton_cache_dir(0)).parent == folder
    assert not folder.exists()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(user_caches)
    assert "TRITON_CACHE_DIR" not in os.environ
    record = start.record
    assert record is not None and record.compile_cache == FRESH_CACHE
    assert record.caches["fx_graph_cache"] is True and "autograd_cache" in record.caches
    assert record.cache_lookups == {} and record.cold_compile is (not record.warm)


def test_a_cache_hit_during_the_case_is_recorded_and_labelled(user_caches: Path) -> None:
    """A lookup that still hits (a remote cache, say) is counted and named: not a cold compile."""
    from torch._dynamo.utils import counters

    with CaseStart(compiled=True) as start:
        counters["inductor"]["fxgraph_cache_hit"] += 2
        counters["inductor"]["fxgraph_cache_miss"] += 1
    record = start.record
    assert record is not None
    assert record.cache_lookups == {"fxgraph_cache_hit": 2, "fxgraph_cache_miss": 1}
    assert record.cold_compile is False and "2 compile cache hits" in record.caveat()


def test_cases_after_the_first_in_a_process_are_warm() -> None:
    with CaseStart(compiled=False) as first:
        pass
    with CaseStart(compiled=False) as second:
        pass
    assert first.record is not None and second.record is not None
    assert second.record.cases_before == first.record.cases_before + 1 and second.record.warm
    assert second.record.compile_cache == "" and second.record.cold_compile is None
    assert Start.from_dict(second.record.to_dict()) == second.record


def _steps(median: float, n: int, seed: int) -> list[float]:
    return list(median * np.exp(np.random.default_rng(seed).normal(0, 0.02, n)))


def test_the_break_even_takes_the_uncompiled_warm_ups_own_excess_off() -> None:
    """Compiled warm-up: 5 s beyond its steady steps; the uncompiled one's: 1 s (cuDNN autotuning,
    lazy loading, paid either way). 4 s charged at 5 ms a step: 800 steps, not 1,000."""
    figure = break_even(5.0, _steps(0.010, 300, 1), _steps(0.015, 300, 2), uncompiled_warmup_s=1.0)
    assert figure.compile_s == 5.0 and figure.charged_s == 4.0 and figure.pays_off
    assert figure.steps == pytest.approx(800, rel=0.05)
    compiled = CaseResult(workload="m", mode="train", device="cpu", batch_size=8, compile_backend="inductor",
                          step_times=_steps(0.010, 300, 1), warmup_steps=2,
                          warmup_time_s=5.0 + 2 * 0.010, time_to_first_step_s=4.9)
    uncompiled = CaseResult(workload="m", mode="train", device="cpu", batch_size=8,
                            step_times=_steps(0.015, 300, 2),
                            warmup_steps=2, warmup_time_s=1.0 + 2 * 0.015, time_to_first_step_s=1.0)
    paired = compile_break_even(compiled, [compiled, uncompiled])
    assert paired is not None and paired.charged_s == pytest.approx(4.0, abs=0.01)
    assert paired.steps == pytest.approx(800, rel=0.05)
    assert paired.uncompiled_warmup_s == pytest.approx(1.0, abs=0.01)


def test_a_warm_side_is_named_in_the_break_even_and_the_first_use() -> None:
    warm = Start(cases_before=1)
    compiled = CaseResult(workload="m", mode="train", device="cpu", batch_size=8, compile_backend="eager",
                          step_times=_steps(0.010, 100, 3), warmup_steps=1, warmup_time_s=2.0,
                          time_to_first_step_s=2.0, start=Start(0, FRESH_CACHE))
    uncompiled = CaseResult(workload="m", mode="train", device="cpu", batch_size=8,
                            step_times=_steps(0.015, 100, 4),
                            warmup_steps=1, warmup_time_s=0.05, time_to_first_step_s=0.05,
                            start=warm)
    assert compiled.first_use().cold_compile is True and compiled.first_use().caveat == ""
    costs = uncompiled.first_use()
    assert costs.warm is True and costs.caveat == "warm: 1 case ran before it in its process"
    assert first_use_cell(uncompiled).endswith("(warm: 1 case ran before it in its process)")
    assert "(warm: 1 case ran" in steady_rows([("A", uncompiled)])[0][7]
    figure = compile_break_even(compiled, [compiled, uncompiled])
    assert figure is not None and figure.caveat == "uncompiled: warm: 1 case ran before it in its process"
    assert figure.describe().endswith("[uncompiled: warm: 1 case ran before it in its process]")


def test_results_written_before_load_unchanged() -> None:
    """No ``start`` field, a break-even without a unit: read as steps, no warm label."""
    old_figure = {"pays_off": True, "steps": 1000.0, "low": 900.0, "high": 1100.0, "compile_s": 5.0,
                  "saving_s": 0.005, "saving_low": 0.004, "saving_high": 0.006, "speedup": 1.5,
                  "confidence": 0.95, "reason": ""}
    case = CaseResult(workload="m", mode="train", device="cpu", batch_size=8, compile_backend="inductor",
                      step_times=[0.01] * 5,
                      warmup_steps=1, warmup_time_s=5.01, time_to_first_step_s=5.01).to_dict()
    case["break_even"] = old_figure
    del case["start"]
    record = RunRecord.from_dict(json.loads(json.dumps(
        {"schema_version": 1, "run_id": "r", "created_at": "2024-01-01T00:00:00+00:00",
         "accelbench_version": "0", "cases": [case]})))
    (loaded,) = record.cases
    assert loaded.start is None and loaded.first_use().warm is None and loaded.first_use().caveat == ""
    figure = loaded.break_even
    assert figure is not None and figure.describe().startswith("compile pays off after 1,000 steps")
    assert figure.charged_s is None


def test_run_inline_marks_the_second_case_of_its_process_warm(cli, tmp_path: Path) -> None:
    inline = tmp_path / "inline.json"
    done = cli("run", "mnist", "--device", "cpu", "--size", "tiny", "--mode", "train,eval",
               "--steps", "3", "--isolation", "none", "--wide", "-o", str(inline))
    assert done.returncode == 0, done.stderr
    first, second = json.loads(inline.read_text())["cases"]
    assert first["start"]["cases_before"] == 0 and not first["start"]["warm"]
    assert second["start"]["warm"] and second["derived"]["first_use"]["warm"]
    assert "warm: 1 case ran before it in its process" in second["derived"]["first_use"]["caveat"]
    assert "(warm:" in done.stdout


@pytest.mark.slow
def test_run_in_worker_processes_starts_every_case_cold(cli, tmp_path: Path) -> None:
    isolated = tmp_path / "isolated.json"
    done = cli("run", "mnist", "--device", "cpu", "--size", "tiny", "--mode", "train,eval",
               "--steps", "3", "--isolation", "process", "-o", str(isolated))
    assert done.returncode == 0, done.stderr
    assert [c["start"]["warm"] for c in json.loads(isolated.read_text())["cases"]] == [False, False]


@pytest.mark.slow
def test_a_second_identical_inductor_compile_is_still_cold(user_caches: Path) -> None:
    """The one inductor test (two cold CPU compiles, tens of seconds): a graph compiled once in
    the user's cache folder hits it when compiled again, but compiles cold as a case."""
    from torch._dynamo.utils import counters

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2 + 1

    def compile_once() -> dict[str, int]:
        torch._dynamo.reset()
        before = dict(counters["inductor"])
        torch.compile(f, backend="inductor")(torch.ones(8))
        return {k: v - before.get(k, 0) for k, v in counters["inductor"].items()
                if "fxgraph_cache" in k and v - before.get(k, 0)}

    compile_once()  # into the user's folder
    assert compile_once().get("fxgraph_cache_hit") == 1  # the user's cache is warm: it would hit
    with CaseStart(compiled=True) as start:
        torch.compile(f, backend="inductor")(torch.ones(8))
    assert start.record is not None
    assert start.record.cache_lookups.get("fxgraph_cache_miss", 0) >= 1
    assert start.record.cache_hits == 0
    torch._dynamo.reset()
