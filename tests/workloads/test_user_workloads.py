"""A user's own workload file: loaded, run, and broken files reported clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import assert_one_line_error

import accelbench
from accelbench.errors import UsageError
from accelbench.workloads.catalogue import load_workload_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "my_model.py"


def test_example_file_runs_through_the_cli(cli, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = cli("run", "--workload-file", str(EXAMPLE), "--device", "cpu", "--size", "tiny",
               "--steps", "3", "--warmup", "1", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    cases = json.loads(out.read_text())["cases"]
    assert [(c["workload"], c["mode"], c["status"]) for c in cases] == [
        ("my-mlp", "train", "ok"), ("my-mlp", "eval", "ok")]


def test_python_api_returns_result_objects() -> None:
    record = accelbench.run(["my-mlp"], device="cpu", steps=2, warmup=0, size="tiny",
                            workload_file=EXAMPLE, save=False)
    assert [c.mode for c in record.cases] == ["train", "eval"]
    assert all(c.ok and c.throughput() > 0 for c in record.cases)
    assert "my-mlp" in accelbench.list_workloads("my-*")


BROKEN = {
    "syntax": ("def broken(:\n", "syntax error at line 1"),
    "raises": ("x = 1\nraise RuntimeError('no GPU here')\n", "RuntimeError while importing (line 2)"),
    "empty": ("x = 1\n", "registers no workload"),
    "missing_method": (
        "import accelbench\n@accelbench.register\nclass W(accelbench.Workload):\n    name = 'w'\n",
        "does not define build_model, make_batches"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_broken_files_are_named(tmp_path: Path, kind: str) -> None:
    source, message = BROKEN[kind]
    path = tmp_path / f"{kind}.py"
    path.write_text(source)
    with pytest.raises(UsageError, match=str(path)) as caught:
        load_workload_file(path)
    assert message in str(caught.value)


def test_broken_file_through_the_cli_is_exit_2(cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text(BROKEN["raises"][0])
    assert_one_line_error(cli("run", "--workload-file", str(path)), "bad.py", "RuntimeError")
    assert_one_line_error(cli("run", "--workload-file", str(tmp_path / "none.py")), "does not exist")


def test_error_text_with_brackets_is_shown_verbatim() -> None:
    from rich.console import Console

    from accelbench.render.table import run_table
    from accelbench.results import CaseResult, RunRecord

    case = CaseResult(workload="w[bold]", mode="train", device="cpu", batch_size=1,
                      status="unavailable", error="pip install 'accelbench[transformers]'")
    console = Console(width=300, record=True)
    console.print(run_table(RunRecord("r", "t", "v", cases=[case])))
    text = console.export_text()
    assert "accelbench[transformers]" in text and "w[bold]" in text


def _readme_snippet() -> str:
    """The Python block of the documentation's "Your own model" section (docs/your-own-model.md)."""
    text = (REPO / "docs" / "your-own-model.md").read_text()
    section = text[text.index("## Your own model"):]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_workload_snippet_runs_train_and_eval(tmp_path: Path) -> None:
    path = tmp_path / "readme_workload.py"
    path.write_text(_readme_snippet())
    assert load_workload_file(path) == ["my-readme-mlp"]
    record = accelbench.run(["my-readme-mlp"], device="cpu", steps=2, warmup=1, size="tiny",
                            workload_file=path, isolation="none", save=False)
    assert [(c.mode, c.status) for c in record.cases] == [("train", "ok"), ("eval", "ok")]


CONTRACT_BREAKS = {
    "no training_loss": ("def training_loss", "training_loss (for mode 'train')"),
    "no make_optimizer": ("def make_optimizer", "make_optimizer (for mode 'train')"),
    "no eval_step": ("def eval_step", "eval_step (for mode 'eval')"),
}


@pytest.mark.parametrize("broken", sorted(CONTRACT_BREAKS))
def test_a_workload_missing_a_mode_method_is_a_usage_error_naming_it(tmp_path: Path,
                                                                     broken: str) -> None:
    method, message = CONTRACT_BREAKS[broken]
    source = _readme_snippet().replace(method, "def _renamed_" + method.removeprefix("def "))
    path = tmp_path / "broken_contract.py"
    path.write_text(source)
    with pytest.raises(UsageError) as caught:
        load_workload_file(path)
    text = str(caught.value)
    assert "MyMLP" in text and message in text and "\n" not in text


def test_an_eval_only_workload_needs_no_training_methods(tmp_path: Path) -> None:
    source = _readme_snippet().replace('name = "my-readme-mlp"',
                                       'name = "my-eval-only"\n    modes = ("eval",)')
    source = source.replace("def training_loss", "def _unused_loss").replace(
        "def make_optimizer", "def _unused_optimizer")
    path = tmp_path / "eval_only.py"
    path.write_text(source)
    assert load_workload_file(path) == ["my-eval-only"]


def test_the_old_readme_contract_is_refused_before_anything_runs(cli, tmp_path: Path) -> None:
    """The README once showed ``train_step(model, optimizer, batch)``: a file written that way
    must fail at load with exit 2, not run and report its training case as unsupported."""
    source = _readme_snippet().replace("def training_loss(self, model, batch)",
                                       "def train_step(self, model, optimizer, batch)")
    path = tmp_path / "old_contract.py"
    path.write_text(source)
    assert_one_line_error(cli("run", "--workload-file", str(path), "--device", "cpu"),
                          "old_contract.py", "training_loss (for mode 'train')")
