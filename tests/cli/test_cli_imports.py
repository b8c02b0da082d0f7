"""Issue 27, "The loop owns its stop rule": parsing arguments imports no numpy, scipy or torch.

``DEFAULT_REPEATS`` lived in ``engine/repeat.py`` and the shared flags (``cli/optiongroups.py``)
imported it from there, so building ``run``'s parser imported the engine, the results and with
them numpy, scipy and torch (1-5 s before a typo could be reported); ``run`` also imported its
renderers and the store before parsing. Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: jinja2: the report and site templates (issue 35) are loaded when a page is written.
HEAVY = ("numpy", "scipy", "torch", "matplotlib", "jinja2")

_PARSE = """
import sys
from accelbench.cli import build_parser, run
argv = sys.argv[1:]
options = run.options_from_args(build_parser(argv).parse_args(argv))
assert options.workloads == ("mnist", "resnet50") and options.repeat == 10, options
print(sorted(name for name in {HEAVY!r} if name in sys.modules))
"""

_HELP = """
import contextlib, io, sys
from accelbench.cli import main
with contextlib.redirect_stdout(io.StringIO()) as shown:
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
assert "usage: accelbench" in shown.getvalue()
print(sorted(name for name in {HEAVY!r} if name in sys.modules))
"""


def _imported(code: str, argv: list[str], home: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code.format(HEAVY=HEAVY), *argv],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ACCELBENCH_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_parsing_a_typical_run_command_line_imports_no_numpy_scipy_or_torch(tmp_path: Path) -> None:
    argv = ["run", "mnist", "resnet50", "--device", "cpu", "--precision", "fp32,bf16",
            "--time-budget", "5", "--target-ci", "1", "--repeat", "--against", "peers.jsonl",
            "--output", "out.json", "--debug"]
    assert _imported(_PARSE, argv, tmp_path) == "[]"


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["report", "--help"]],
                         ids=" ".join)
def test_help_imports_no_numpy_scipy_or_torch(argv: list[str], tmp_path: Path) -> None:
    """Issue 36: ``report --help`` imported matplotlib, the results and the store (0.8 s here)
    before drawing anything; they are imported once the report is drawn."""
    assert _imported(_HELP, argv, tmp_path) == "[]"


def _subcommands() -> list[str]:
    from accelbench.cli import build_parser

    parser = build_parser(["--help"])
    actions = [a for a in parser._actions if getattr(a, "choices", None) and isinstance(a.choices, dict)]
    return sorted(actions[0].choices)


@pytest.mark.parametrize("command", _subcommands())
def test_every_commands_help_imports_no_scipy_or_torch(command: str, tmp_path: Path) -> None:
    """Issue 30: every --help answers in under 2 s. scipy alone took ~0.7 s to import (results/
    and compare/ imported it at the top, so check, probe, history and compare's help took 1.9-2.1 s
    here); torch takes seconds. numpy is allowed (0.1 s)."""
    imported = _imported(_HELP.replace("{HEAVY!r}", "('scipy', 'torch')"), [command, "--help"], tmp_path)
    assert imported == "[]", f"{command} --help imports {imported}"
