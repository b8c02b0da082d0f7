"""A user's own workload file: loaded, run, and broken files reported clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import assert_one_line_error

import accelbench
from accelbench.errors import UsageError
from accelbench.userfile import load_workload_file

REPO = Path(__file__).resolve().parent.parent
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
