"""accelbench.bench(model, batch) used as from a notebook: the record, its HTML, the history."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import torch
from torch import nn

import accelbench
from accelbench.errors import UsageError
from accelbench.render.format import format_rate
from accelbench.workloads.named import objects


def _model() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))


def _batch(rows: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(rows, 3, 4, generator=generator), torch.randint(0, 3, (rows,), generator=generator)


def test_bench_a_sequential_in_worker_processes_like_a_notebook(accelbench_home: Path) -> None:
    result = accelbench.bench(_model(), _batch(), device="cpu", steps=3, warmup=1)

    assert isinstance(result, accelbench.api.RunRecord)
    assert [(c.workload, c.mode, c.device, c.status) for c in result.cases] == [
        ("bench:Sequential", "train", "cpu", "ok"), ("bench:Sequential", "eval", "cpu", "ok")]
    for case in result.cases:
        assert case.batch_size == 4 and len(case.step_times) == 3 and case.throughput() > 0
        assert case.isolation == "process"  # nn.Sequential of torch layers pickles
        assert case.workload_version == objects.spec_version(
            objects.BenchSpec(_model(), _batch(), None, objects.optimizer_factory(None), 400))
    page = result._repr_html_()
    assert page.startswith("<table>") and "bench:Sequential" in page and "samples/s" in page
    assert f"<td>{format_rate(result.cases[0].throughput())}</td>" in page
    # Stored like a run: the JSON file and the history database.
    assert list((accelbench_home / "results").glob(f"*{result.run_id}.json"))
    with sqlite3.connect(next(accelbench_home.glob("**/history.sqlite"))) as db:
        stored = db.execute("SELECT workload FROM cases WHERE run_id = ?", (result.run_id,)).fetchall()
    assert stored == [("bench:Sequential",), ("bench:Sequential",)]


def test_the_bench_model_rides_in_the_spec_not_the_environment() -> None:
    """Issue 27 (one typed spec): a worker finds a bench() model through the path of its pickle
    file in the case's spec, not through an environment variable beside it; the path is there
    only while the bench call shares it, and a worker that loads it resolves the name."""
    import os

    from accelbench.devices import DeviceSet
    from accelbench.engine.case import Case
    from accelbench.engine.runner import RunWork
    from accelbench.engine.spec import CaseSpec, load_model_files
    from accelbench.options import RunOptions

    spec = objects.BenchSpec(_model(), _batch(), None, objects.optimizer_factory(None), 40)
    name = accelbench.register(objects.object_class("rides", spec)).name
    case = Case(workload=name, mode="train", device=DeviceSet.current().select("cpu")[0], batch_size=4)
    work = RunWork(RunOptions(workloads=(name,), size="tiny"))
    before = dict(os.environ)
    with objects.shared_with_workers("rides", spec) as path:
        sent = CaseSpec.from_json(work.spec(case).to_json())
        assert sent.model_files == (str(path),) and dict(os.environ) == before
        load_model_files(sent.model_files)  # what the worker does before the case
        assert objects.resolve("rides").spec.batch[0].shape == (4, 3, 4)
    assert work.spec(case).model_files == ()  # shared no longer: nothing to name


def test_a_lambda_loss_runs_inline_and_says_why(monkeypatch) -> None:
    calls: list[int] = []

    def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return nn.functional.cross_entropy(output, target)

    result = accelbench.bench(_model(), _batch(), loss_fn=lambda o, t: loss(o, t), device="cpu",
                              modes="train", steps=2, warmup=0, optimizer=torch.optim.Adam,
                              batch_size=6, save=False)
    (case,) = result.cases
    assert case.ok and case.batch_size == 6
    assert case.isolation.startswith("inline: it cannot be pickled")
    assert len(calls) >= 2  # the caller's own loss ran: inline, in this process
    assert "inline: it cannot be pickled" in result._repr_html_()
    # Issue 36: print(result) outside a notebook is the run's table, not a dataclass dump; repr
    # is one short line.
    monkeypatch.setenv("COLUMNS", "100")
    text = str(result)
    assert text.splitlines()[0].startswith(f"accelbench run {result.run_id}")
    assert "samples/s" in text and "CaseResult(" not in text and "step_times" not in text
    assert all(len(line) <= 100 for line in text.splitlines())
    assert repr(result) == f"<accelbench run {result.run_id}: 1 case, 1 ok>"


def test_main_module_objects_are_not_sent_to_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A function defined in a notebook lives in __main__: it pickles, but a worker process (whose
    __main__ is accelbench.engine.launchers.worker) could not load it, so bench must run inline."""
    import __main__

    def notebook_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(output, target)

    notebook_loss.__module__, notebook_loss.__qualname__ = "__main__", "notebook_loss"
    monkeypatch.setattr(__main__, "notebook_loss", notebook_loss, raising=False)
    spec = objects.BenchSpec(_model(), _batch(), None, objects.optimizer_factory(None), 8)
    assert objects.why_not_picklable(spec) is None
    spec.loss_fn = notebook_loss
    assert "defined in __main__" in (objects.why_not_picklable(spec) or "")


def test_default_losses_and_optimisers() -> None:
    out = torch.randn(4, 3, requires_grad=True)
    assert objects.default_loss(out, torch.tensor([0, 1, 2, 0])).item() > 0
    assert objects.default_loss(out, torch.zeros(4, 3)).item() == pytest.approx((out ** 2).mean().item())
    assert objects.default_loss(out).item() == pytest.approx((out ** 2).mean().item())
    instance = torch.optim.Adam(_model().parameters(), lr=0.123)
    cls, settings = objects.optimizer_factory(instance)
    assert cls is torch.optim.Adam and settings["lr"] == 0.123


@pytest.mark.parametrize("batch, message", [
    ("not a tensor", "example_batch must be a tensor"),
    ((torch.zeros(4, 2), torch.zeros(3)), "share a non-empty first"),
    ((), "example_batch must be a tensor"),
])
def test_bad_example_batches_are_usage_errors(batch: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        accelbench.bench(_model(), batch, device="cpu", steps=1, save=False)


def test_a_non_module_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="needs a torch.nn.Module"):
        accelbench.bench("resnet", _batch(), device="cpu", steps=1, save=False)


def test_repeat_needs_a_model_that_can_go_to_a_worker() -> None:
    with pytest.raises(UsageError, match="repeat=3 needs a worker process per repeat.*cannot be pickled"):
        accelbench.bench(_model(), _batch(), loss_fn=lambda o, t: o.sum(), device="cpu", steps=1,
                         repeat=3, save=False)


def test_the_readmes_first_python_example_is_bench_and_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    first = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "accelbench.bench(" in first
    exec(compile(first.replace("steps=20", "steps=2, warmup=1"), "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    rows = [line.split()[:3] for line in printed]
    assert ["cpu", "train", "ok"] in rows and ["cpu", "eval", "ok"] in rows  # device="all"
    assert all(row[2] == "ok" for row in rows)


def test_two_models_with_one_name_get_their_own_flops() -> None:
    """FLOPs are counted per model: a second, wider Sequential in the same process is not
    reported with the first one's counts."""
    per_sample = []
    for width in (8, 64):
        model = nn.Sequential(nn.Flatten(), nn.Linear(12, width), nn.ReLU(), nn.Linear(width, 3))
        result = accelbench.bench(model, _batch(), device="cpu", modes="eval", steps=1, warmup=0,
                                  isolation="none", save=False)
        per_sample.append(result.cases[0].flops.per_sample)
    assert per_sample == [2 * (12 * 8 + 8 * 3), 2 * (12 * 64 + 64 * 3)]
