"""Issue 27, "A contract that covers everything": ``--debug`` is one global flag.

Each command declared its own ``--debug`` (five did not), and ``accelbench --debug COMMAND`` was
refused. Now ``cli.build_parser`` declares it once, before the command and (as before) after it.
Every command honours it: a bad input with ``--debug`` raises (the traceback), without it is one
line and exit code 2. A command added to ``cli.COMMANDS`` without a bad input here fails
``test_every_command_has_a_bad_input``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from accelbench.cli import COMMANDS, build_parser, main
from accelbench.errors import UsageError

#: A bad input for each command, refused once the command runs (not by argparse, whose errors
#: are one line with or without --debug), and the words of its refusal. The history is empty.
BAD_INPUT: dict[str, tuple[list[str], str]] = {
    "run": (["run", "nosuch"], "unknown workload 'nosuch'"),
    "check": (["check", "nosuch"], "unknown workload 'nosuch'"),
    "sweep": (["sweep", "nosuch", "--batch-size", "2"], "unknown workload 'nosuch'"),
    "probe": (["probe", "--isolation", "bogus"], "--isolation 'bogus' is unknown"),
    "scale": (["scale", "nosuch"], "unknown workload 'nosuch'"),
    "selftest": (["selftest", "--only", "bogus"], "is not a check group"),
    "roofline": (["roofline", "--sustained-interval", "5"], "need --sustained MINUTES"),
    "list": (["list", "nosuch"], "unknown workload 'nosuch'"),
    "history": (["history", "--mode", "train"], "--mode needs --workload"),
    "compare": (["compare"], "give runs to compare"),
    "report": (["report"], "no history database"),
    "import": (["import", "missing.json"], "missing.json"),
    "export": (["export", "abc"], "no history database"),
    "share": (["share", "missing.json"], "give the bundle file to write"),
    "site": (["site", "missing.jsonl", "-o", "site"], ""),
    "hub": (["hub"], "give a hub command"),
}
#: Commands that take no input that could be bad: the flag is parsed in both places.
NO_BAD_INPUT = {"doctor"}


def test_every_command_has_a_bad_input() -> None:
    assert set(BAD_INPUT) | NO_BAD_INPUT == set(COMMANDS)


Place = Callable[[list[str]], list[str]]
PLACES: dict[str, Place] = {
    "before": lambda argv: ["--debug", *argv],
    "after": lambda argv: [*argv, "--debug"],
}


@pytest.mark.parametrize("command", sorted(BAD_INPUT))
def test_without_debug_a_bad_input_is_one_line_and_exit_2(command: str, inline_cli) -> None:
    argv, words = BAD_INPUT[command]
    done = inline_cli(*argv)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert lines and lines[-1].startswith("accelbench: error: ") and words in lines[-1], done.stderr
    # Warnings may come first (site's unreadable source); no traceback ever.
    assert all(line.startswith("accelbench: ") for line in lines), done.stderr


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("command", sorted(BAD_INPUT))
def test_with_debug_a_bad_input_raises_wherever_the_flag_is(command: str, place: str,
                                                             tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv, words = BAD_INPUT[command]
    with pytest.raises(UsageError, match=None) as raised:
        main(PLACES[place](argv))
    assert words in str(raised.value)


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_parses_the_flag_in_both_places(command: str, place: str) -> None:
    given = BAD_INPUT[command][0] if command in BAD_INPUT else [command]
    argv = PLACES[place](given)
    assert build_parser(argv).parse_args(argv).debug is True
    assert build_parser(given).parse_args(given).debug is False


def test_the_entry_point_shows_the_traceback_only_with_debug(cli) -> None:
    quiet: subprocess.CompletedProcess[str] = cli("history", "--mode", "train")
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr
    loud = cli("--debug", "history", "--mode", "train")
    assert loud.returncode == 1 and "Traceback" in loud.stderr and "UsageError" in loud.stderr
