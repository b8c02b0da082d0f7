"""One option model: the CLI's flags and the Python API's keywords build the same RunOptions,
reject the same bad values with the same message, and run the same data check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import accelbench
from accelbench import api
from accelbench.cli import build_parser, main
from accelbench.errors import UsageError
from accelbench.options import DEFAULT_REPEATS, RunOptions, StopRule
from accelbench.options.values import DEFAULTS

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = str(REPO / "examples" / "my_model.py")


def cli_options(command: str, argv: list[str]) -> RunOptions:
    """The RunOptions ``accelbench COMMAND ARGV`` would run with (parsed, not run)."""
    import importlib

    args = build_parser([command]).parse_args([command, *argv])
    return importlib.import_module(f"accelbench.cli.{command}").options_from_args(args)


@pytest.fixture
def api_options(monkeypatch: pytest.MonkeyPatch) -> list[RunOptions]:
    """The RunOptions each API call hands to execute (which would run the models)."""
    seen: list[RunOptions] = []
    monkeypatch.setattr(api, "execute", lambda options, *args, **kwargs: seen.append(options))
    return seen


PARITY = [
    (["mnist"], {"workloads": "mnist"}),
    (["mnist", "--steps", "5", "--warmup", "1", "--batch-size", "8", "--threads", "2", "--size",
      "tiny", "--mode", "train"],
     {"workloads": ["mnist"], "steps": 5, "warmup": 1, "batch_size": 8, "threads": 2,
      "size": "tiny", "modes": "train"}),
    (["mnist", "vae", "--time-budget", "3", "--target-ci", "0.5", "--auto-batch", "--case-timeout",
      "60", "--cooldown", "1.5", "--repeat", "--profile"],
     {"workloads": ["mnist", "vae"], "time_budget": 3, "target_ci": 0.5, "auto_batch": True,
      "case_timeout": 60, "cooldown": 1.5, "repeat": DEFAULT_REPEATS, "profile": True}),
    (["mnist", "--precision", "fp32,bf16", "--compile", "--channels-last", "--device", "cpu"],
     {"workloads": "mnist", "precision": ["fp32", "bf16"], "compile": True,
      "channels_last": True, "device": "cpu"}),
    (["mnist", "--compile", "eager,inductor", "--epochs", "1", "--data", "synthetic-device",
      "--isolation", "none", "--mode", "eval,train"],
     {"workloads": "mnist", "compile": "eager,inductor", "epochs": 1, "data": "synthetic-device",
      "isolation": "none", "modes": ["eval", "train"]}),
    (["mnist", "--no-cudnn-benchmark"], {"workloads": "mnist", "cudnn_benchmark": False}),
    (["--suite", "quick"], {"suite": "quick"}),
    (["--workload-file", EXAMPLE], {"workload_file": EXAMPLE}),
]


@pytest.mark.parametrize(("argv", "keywords"), PARITY)
def test_the_cli_and_the_api_build_the_same_options(argv: list[str], keywords: dict[str, Any],
                                                    api_options: list[RunOptions]) -> None:
    accelbench.run(**keywords)
    assert api_options[0].to_dict() == cli_options("run", argv).to_dict()


def test_real_data_options_are_the_same_too(tmp_path: Path, api_options: list[RunOptions]) -> None:
    accelbench.run("mnist", data="real", data_dir=str(tmp_path), workers=2)
    built = cli_options("run", ["mnist", "--data", "real", "--data-dir", str(tmp_path),
                                "--workers", "2"])
    assert api_options[0].to_dict() == built.to_dict() and built.data_dir == tmp_path


def test_sweep_takes_the_same_keywords_as_its_command(api_options: list[RunOptions]) -> None:
    accelbench.sweep("mnist", "1,4", precision="bf16", steps=2, data="synthetic-device",
                     cooldown=1, target_ci=0, cudnn_benchmark=False)
    built = cli_options("sweep", ["mnist", "--batch-size", "1,4", "--precision", "bf16", "--steps",
                                  "2", "--data", "synthetic-device", "--cooldown", "1",
                                  "--target-ci", "0", "--no-cudnn-benchmark"])
    assert api_options[0].to_dict() == built.to_dict() and not built.cudnn_benchmark
    assert built.batch_size is None  # the sweep's list is not every case's batch size
    with pytest.raises(UsageError, match="sweep\\(\\) has no option 'auto_batch'"):
        accelbench.sweep("mnist", [1, 4], auto_batch=True)


def test_bench_takes_runs_keywords(api_options: list[RunOptions]) -> None:
    model = nn.Linear(4, 2)
    accelbench.bench(model, torch.zeros(8, 4), device="cpu",
                     time_budget=2, target_ci=1, auto_batch=True, cooldown=0.5, profile=True,
                     case_timeout=30, precision="fp32,bf16", cudnn_benchmark=False)
    options = api_options[0]
    assert options.stop == StopRule("time", 2, 1) and options.auto_batch and options.profile
    assert options.cudnn_benchmark is False
    assert (options.cooldown, options.case_timeout, options.precisions) == (0.5, 30,
                                                                         ("fp32", "bf16"))
    with pytest.raises(UsageError, match="bench\\(\\) has no option 'data_dir'"):
        accelbench.bench(model, torch.zeros(8, 4), data_dir="/data")


def test_cudnn_benchmark_is_on_by_default_in_the_timed_commands() -> None:
    assert DEFAULTS["cudnn_benchmark"] is True and RunOptions().cudnn_benchmark is True
    for command, argv in (("run", ["mnist"]), ("sweep", ["mnist", "--batch-size", "1"])):
        assert cli_options(command, argv).cudnn_benchmark is True
        assert cli_options(command, [*argv, "--no-cudnn-benchmark"]).cudnn_benchmark is False
    assert RunOptions.from_dict(RunOptions(cudnn_benchmark=False).to_dict()).cudnn_benchmark is False


def test_every_command_shares_the_defaults() -> None:
    """A shared option left out means the same in run, sweep, check and scale as in the API."""
    from accelbench.cli.optiongroups import run_keywords

    # parity's step count; the sweep's list; scale's process counts (a list of world sizes)
    own = {"check": "steps", "sweep": "batch_size", "scale": "nproc"}
    for argv in (["run"], ["sweep", "mnist", "--batch-size", "1"], ["check"], ["scale", "mnist"]):
        values = run_keywords(build_parser(argv).parse_args(argv), exclude=(own.get(argv[0], ""),))
        assert len(values) >= 6, values
        for name, value in values.items():
            assert (tuple(value) if isinstance(value, list) else value) == DEFAULTS[name], name


M = {"workloads": "mnist"}
BAD = [
    (["mnist", "--steps", "0"], {**M, "steps": 0}),
    (["mnist", "--steps", "2000000000"], {**M, "steps": 2_000_000_000}),
    (["mnist", "--batch-size", "-4"], {**M, "batch_size": -4}),
    (["mnist", "--threads", "0"], {**M, "threads": 0}),
    (["mnist", "--warmup", "-1"], {**M, "warmup": -1}),
    (["mnist", "--workers", "-2"], {**M, "workers": -2}),
    (["mnist", "--time-budget", "0"], {**M, "time_budget": 0}),
    (["mnist", "--time-budget", "inf"], {**M, "time_budget": float("inf")}),
    (["mnist", "--target-ci", "150"], {**M, "target_ci": 150}),
    (["mnist", "--steps", "3", "--target-ci", "1"], {**M, "steps": 3, "target_ci": 1}),
    (["mnist", "--steps", "3", "--epochs", "1"], {**M, "steps": 3, "epochs": 1}),
    (["mnist", "--case-timeout", "0"], {**M, "case_timeout": 0}),
    (["mnist", "--cooldown", "-1"], {**M, "cooldown": -1}),
    (["mnist", "--repeat", "0"], {**M, "repeat": 0}),
    (["mnist", "--repeat", "2", "--isolation", "none"], {**M, "repeat": 2, "isolation": "none"}),
    (["mnist", "--isolation", "thread"], {**M, "isolation": "thread"}),
    (["mnist", "--size", "huge"], {**M, "size": "huge"}),
    (["mnist", "--data", "disk"], {**M, "data": "disk"}),
    (["mnist", "--data", "real"], {**M, "data": "real"}),
    (["mnist", "--precision", "fp64x"], {**M, "precision": "fp64x"}),
    (["mnist", "--mode", "infer"], {**M, "modes": "infer"}),
    (["mnist", "--suite", "quick"], {**M, "suite": "quick"}),
    (["--suite", "nope"], {"suite": "nope"}),
    (["nosuch"], {"workloads": "nosuch"}),
]


@pytest.mark.parametrize(("argv", "keywords"), BAD)
def test_bad_values_give_the_same_message_from_the_cli_and_the_api(
        argv: list[str], keywords: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import accelbench.cli.driven as driven  # run imports run_driven from it once it runs

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("bad options reached the runner")

    monkeypatch.setattr(driven, "run_driven", never)
    monkeypatch.setattr(api, "execute", never)
    with pytest.raises(UsageError) as raised:
        accelbench.run(**keywords)
    assert main(["run", *argv]) == 2
    assert capsys.readouterr().err == f"accelbench: error: {raised.value}\n"


def test_the_api_checks_the_data_as_the_cli_does(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    quick = ["--device", "cpu", "--steps", "1"]
    for data_dir in (tmp_path / "missing", tmp_path):  # no folder; a folder without MNIST's files
        argv = ["run", "mnist", "--data", "real", "--data-dir", str(data_dir), *quick]
        assert main(argv) == 2
        error = capsys.readouterr().err.removeprefix("accelbench: error: ").strip()
        with pytest.raises(UsageError) as raised:
            accelbench.run("mnist", device="cpu", steps=1, data="real", data_dir=data_dir)
        assert str(raised.value) == error and str(data_dir) in error
        if data_dir.is_dir():
            assert "train-images-idx3-ubyte" in error
            made = RunOptions(workloads=("mnist",), device="cpu", data="real", data_dir=data_dir)
            with pytest.raises(UsageError, match="train-images-idx3-ubyte"):
                accelbench.run(options=made)  # options made by hand are checked as well


def test_options_or_keywords_not_both() -> None:
    with pytest.raises(UsageError, match="not both \\(got 'steps'\\)"):
        accelbench.run(options=RunOptions(), steps=3)
    # run's keywords are its parameters (declared once: options/declared.py), so Python itself
    # refuses an unknown one, as a type checker does before the call
    with pytest.raises(TypeError, match="unexpected keyword argument 'warmup_steps'"):
        accelbench.run("mnist", warmup_steps=3)  # type: ignore[call-arg]


def test_a_run_through_the_api_records_the_options_it_was_given() -> None:
    record = accelbench.run("mnist", device="cpu", modes="train", size="tiny", time_budget=0.5,
                            target_ci=5, auto_batch=True, isolation="none", warmup=1)
    assert [case.status for case in record.cases] == ["ok"]
    stored = record.options.run_options()
    assert stored is not None and stored.stop == StopRule("time", 0.5, 5) and stored.auto_batch


def test_no_module_shadows_an_api_function() -> None:
    """``import accelbench.X.y`` sets the attribute ``accelbench.X`` to the package: a package
    named like an API function (a ``sweep/`` package once did) replaces ``accelbench.sweep``."""
    import importlib
    import pkgutil

    modules = {info.name for info in pkgutil.iter_modules(accelbench.__path__)}
    assert not modules & {"run", "bench", "sweep", "list_workloads", "register"}
    importlib.import_module("accelbench.sweeps.run")
    assert callable(accelbench.sweep) and accelbench.sweep.__module__ == "accelbench.api"


# --- issue 35: each option declared once (options/declared.py) ---------------------------------
def _generator() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("option_tables", REPO / "scripts" / "option_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_accelbench_run_takes_every_declared_option_with_its_default_and_documents_it() -> None:
    import inspect

    from accelbench.options.declared import OPTIONS
    from accelbench.options.values import RunKeywords, keyword_names

    parameters = inspect.signature(accelbench.run).parameters
    own = {"workloads", "device", "modes", "options", "save", "progress"}
    assert set(parameters) - own == set(OPTIONS)
    doc = " ".join((inspect.getdoc(accelbench.run) or "").split())
    for name, option in OPTIONS.items():
        parameter = parameters[name]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert parameter.default == option.default, name
        assert parameter.annotation == option.annotation, name
        assert f"{name}: ``{option.flag}``: {option.help[:30]}" in doc, name
        if option.tiny:
            assert "at --size tiny" in doc.split(f"{name}: ``", 1)[1].split("``:", 2)[1], name
    # The keyword types of sweep and bench (TypedDicts, for static checks) say the same
    assert set(keyword_names(RunKeywords)) == set(OPTIONS)
    for name, annotation in RunKeywords.__annotations__.items():
        written = getattr(annotation, "__forward_arg__", annotation)
        assert written == OPTIONS[name].annotation, name


def test_the_docs_table_and_the_api_are_written_from_the_declaration() -> None:
    """scripts/option_tables.py writes them; run it after changing an option."""
    generator = _generator()
    page = (REPO / "docs" / "run.md").read_text(encoding="utf-8")
    assert generator.page_text(page) == page, "docs/run.md is stale: run scripts/option_tables.py"
    source = (REPO / "src" / "accelbench" / "api.py").read_text(encoding="utf-8")
    assert generator.api_source(source) == source, "api.py is stale: run scripts/option_tables.py"
    from accelbench.options.declared import RUN_OPTIONS

    for option in RUN_OPTIONS:
        assert f"| `{option.usage()}` | `{option.keyword}` |" in page


def _help(command: str) -> str:
    import argparse

    from accelbench.cli.common import command_parser

    parser = build_parser([command])
    return " ".join(command_parser(parser, argparse.Namespace(command=command)).format_help().split())


def test_run_help_states_each_sizes_defaults_and_shows_examples() -> None:
    """Issue 36: run --help said only the published size's defaults (a 10 s budget where
    --size tiny measures 0.5 s); it says both, the declaration's values, and ends in examples."""
    from accelbench.measure.loop.stop import DEFAULT_TARGET_CI_PCT, DEFAULT_TIME_BUDGET_S
    from accelbench.options import TINY_TARGET_CI_PCT, TINY_TIME_BUDGET_S

    text = _help("run")
    assert (f"--time-budget SECONDS measure for about this long per case (default "
            f"{DEFAULT_TIME_BUDGET_S:g} s; {TINY_TIME_BUDGET_S:g} s at --size tiny)") in text
    assert f"(default {DEFAULT_TARGET_CI_PCT:g}; {TINY_TARGET_CI_PCT:g} at --size tiny)" in text
    assert "examples: accelbench run --size tiny" in text
    for command, flag, words in (("export", "--format", "one record per metric"),
                                 ("report", "--title", "page title")):
        assert words in _help(command).split(flag, 2)[2], command
