"""Every command that measures takes the same options for where its result goes and how much it
says: ``--output``, ``--db``, ``--quiet``, ``--debug`` (selftest and roofline keep nothing in the
history, so they take all but ``--db``). ``scale``, ``check`` and ``probe`` used to refuse
``--quiet`` ("unrecognized arguments")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.cli import build_parser

FOUR = ["--output", "out.json", "--db", "h.sqlite", "--quiet", "--debug"]
MEASURING = {
    "run": ["run", "mnist"], "sweep": ["sweep", "mnist", "--batch-size", "2,4"], "check": ["check", "mnist"],
    "probe": ["probe"], "scale": ["scale", "mnist"],
}
NO_HISTORY = {"selftest": ["selftest"], "roofline": ["roofline"]}


@pytest.mark.parametrize("command", sorted(MEASURING))
def test_every_measuring_command_takes_the_four_options(command: str) -> None:
    argv = [*MEASURING[command], *FOUR]
    args = build_parser(argv).parse_args(argv)
    assert (args.output, args.db, args.quiet, args.debug) == (
        Path("out.json"), Path("h.sqlite"), True, True)


@pytest.mark.parametrize("command", sorted(NO_HISTORY))
def test_selftest_and_roofline_take_output_quiet_and_debug(command: str) -> None:
    argv = [*NO_HISTORY[command], "--output", "out.json", "--quiet", "--debug"]
    args = build_parser(argv).parse_args(argv)
    assert (args.output, args.quiet, args.debug) == (Path("out.json"), True, True)


def test_option_parsing_imports_no_torch() -> None:
    """Building any command's parser and parsing its options must not import torch (the
    commands that only read results start in a fraction of a second)."""
    code = ("import sys\n"
            "from accelbench.cli import COMMANDS, build_parser\n"
            "import accelbench.options, accelbench.options.values, accelbench.options.check\n"
            "import accelbench.options.probe, accelbench.options.scale\n"
            "from accelbench.workloads import registry\n"
            "assert 'mnist' in registry.builtin_names()\n"
            "for name in COMMANDS:\n"
            "    build_parser([name])\n"
            "build_parser(['run', 'mnist']).parse_args(['run', 'mnist', '--precision', 'bf16'])\n"
            "print('torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_option_validation_imports_no_torch() -> None:
    """Turning each measuring command's flags into its validated options imports no torch
    either: workload names and wildcards are checked against the registry, the precisions
    against the torch-free table, scale's and check's options are plain data. (Validation used
    to resolve every name through the workload modules, and scale's options lived beside its
    torchrun launcher: both imported torch.)"""
    code = ("import sys\n"
            "from accelbench.cli import build_parser, check, run, scale, sweep\n"
            "from accelbench.errors import UsageError\n"
            "def options(module, *argv):\n"
            "    return module.options_from_args(build_parser(list(argv)).parse_args(list(argv)))\n"
            "assert options(run, 'run', 'mnist', 'v*', '--precision', 'fp32,bf16').workloads == "
            "('mnist', 'vae', 'vgg16')\n"
            "assert 'resnet50' in options(run, 'run', '--suite', 'full').workloads\n"
            "options(sweep, 'sweep', 'mnist', '--batch-size', '2,4')\n"
            "assert options(check, 'check', 'mnist', '--steps', '2').steps == 2\n"
            "assert options(scale, 'scale', 'mnist', '--nproc', '1,2').nproc == (1, 2)\n"
            "try:\n"
            "    options(run, 'run', 'nope*')\n"
            "except UsageError as error:\n"
            "    assert \"unknown workload 'nope*'; known: bert-base\" in str(error), error\n"
            "else:\n"
            "    raise AssertionError('nope* accepted')\n"
            "print('torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(("flags", "needle"), [
    (["--isolation", "bogus"], "--isolation 'bogus' is unknown; allowed: process, none"),
    (["--case-timeout", "0"], "--case-timeout must be positive, got 0"),
])
def test_probe_refuses_a_bad_isolation_or_timeout_before_probing(flags: list[str], needle: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """probe's options are validated like run's (they once went to the probe unchecked: an
    unknown --isolation probed inline, a zero --case-timeout timed every worker out)."""
    from accelbench.cli import main

    assert main(["probe", "--device", "cpu", "--feature", "*conv*", "--skip-compile", *flags]) == 2
    assert needle in capsys.readouterr().err


def test_scale_quiet_writes_its_result_and_no_live_display(cli, tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    done = cli("scale", "mnist", "--size", "tiny", "--device", "cpu", "--nproc", "1", "--steps", "2",
               "--warmup", "1", "--quiet", "-o", str(out), "--db", str(tmp_path / "h.sqlite"))
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    assert record["cases"] and all(case["status"] == "ok" for case in record["cases"])
    assert "Saved to" in done.stdout
    assert "\x1b[" not in done.stdout + done.stderr  # no live display drawn
    assert (tmp_path / "h.sqlite").exists()
