"""Argument types and the parser that reports bad usage as one line with exit code 2."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from accelbench.errors import UsageError, did_you_mean

#: What ``--debug`` does unless a command says more (its module's ``DEBUG_HELP``).
DEBUG_HELP = "show tracebacks instead of one line"
#: What people type for a choice that is spelled otherwise (too short for a close match).
CHOICE_ALIASES: dict[str, tuple[str, ...]] = {"md": ("markdown",)}


class FittingHelpFormatter(argparse.HelpFormatter):
    """argparse's help at the terminal's width (argparse reads it), wrapped by the tables' rule
    (render/words.py): never inside a flag ("--prompt-len", where textwrap breaks at hyphens), a
    number with its unit or a long word."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        from accelbench.render.words import wrap

        return wrap(self._whitespace_matcher.sub(" ", text).strip(), width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        from accelbench.render.words import wrap

        lines = wrap(self._whitespace_matcher.sub(" ", text).strip(), width - len(indent))
        return "\n".join(indent + line for line in lines)


class ExamplesHelpFormatter(FittingHelpFormatter):
    """The fitting help with the description and epilog kept as written: a command's examples,
    one per line (each already within 80 columns)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (no usage dump) naming the help of the command it
    is about, with "did you mean" for a mistyped flag, subcommand or choice, and exit code 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", FittingHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"accelbench: error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(2)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # A mistyped subcommand or choice ("rnu", "hub compat", "--format md") gets a "did you
        # mean" rather than the whole list; the list stays where nothing is close.
        if action.choices is None or value in action.choices:
            return
        hint = did_you_mean(str(value), map(str, action.choices), CHOICE_ALIASES)
        listed = hint or f" (choose from {', '.join(map(repr, action.choices))})"
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}{listed}")

    def parse_args(  # type: ignore[override]  # one signature for typeshed's overloads
            self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        # argparse reports unknown flags from the top parser ("see 'accelbench --help'"): here
        # they are reported by the (sub)command's own parser, which knows the flags to suggest.
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = command_parser(self, parsed)
            parser.error(f"unrecognized arguments: {' '.join(extras)}{_hint(parser, extras)}")
        return parsed


def _hint(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """What an unrecognized argument likely meant: a flag of this command, or a second source
    typed after one ``--against`` (each takes one)."""
    from accelbench.cli.optiongroups import looks_like_source

    unknown = next((arg for arg in extras if arg.startswith("-")), "")
    if unknown:
        return did_you_mean(unknown.split("=", 1)[0], parser._option_string_actions)
    source = next((arg for arg in extras if looks_like_source(arg)), "")
    if source and "--against" in parser._option_string_actions:
        return f" (each --against takes one source: --against {source})"
    return ""


def command_parser(parser: argparse.ArgumentParser,
                   parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``parsed`` chose: ``accelbench run``, ``accelbench hub
    compact``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
            if chosen is not None:
                return command_parser(chosen, parsed)
    return parser


def _number(text: str, kind: type, what: str) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _bounded(kind: type, what: str, allow_zero: bool, most: float) -> Callable[[str], Any]:
    """An argparse type: a finite ``kind`` above zero (or at least zero), at most ``most``."""

    def parse(text: str) -> Any:
        value = kind(_number(text.strip(), kind, what))
        if value < 0 or (value == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(
                f"{text!r} must be {'0 or more' if allow_zero else f'positive ({what})'}")
        if value > most:
            raise argparse.ArgumentTypeError(f"{text!r} is too large (at most {most:.0f})")
        return value

    return parse


positive_int = _bounded(int, "a whole number", allow_zero=False, most=10**9)
non_negative_int = _bounded(int, "a whole number", allow_zero=True, most=10**9)
positive_float = _bounded(float, "a number", allow_zero=False, most=1e7)
non_negative_float = _bounded(float, "a number", allow_zero=True, most=1e7)


def comma_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def say(line: str) -> None:
    """A note, warning or summary on stderr: wrapped by the tables' rule on a terminal (a line
    the terminal broke would split a path or a figure), one line where a script reads it.
    Errors stay one line everywhere (``main``)."""
    if sys.stderr.isatty():
        from accelbench.cli.console import make_console
        from accelbench.render.fit import Prose

        make_console(stderr=True, highlight=False).print(Prose(line))
    else:
        sys.stderr.write(line + "\n")


def fail(message: str) -> NoReturn:
    raise UsageError(message)


def add_debug_argument(parser: argparse.ArgumentParser, help: str = DEBUG_HELP) -> None:
    """``--debug``: one flag for every command, declared by ``cli.build_parser`` before the
    command (``accelbench --debug run``) and after it (``accelbench run --debug``). After it, the
    flag is only set when given: a default there would overwrite the one given before."""
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=help)


def add_saving_arguments(parser: argparse.ArgumentParser,
                         db_help: str = "history database (default: the per-user one)") -> None:
    """Where a command's record goes besides the per-user folder, and how much it says: the same
    options for every command that measures (run, sweep, check, probe, scale, selftest,
    roofline); ``--debug`` is every command's (``cli.build_parser``)."""
    parser.add_argument("--output", "-o", type=Path, metavar="FILE.json",
                        help="also write the result JSON here")
    parser.add_argument("--db", type=Path, help=db_help)
    add_quiet_argument(parser, "no live progress display")


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The same options for the commands that measure but keep nothing in the history (selftest,
    roofline: their figures go to the data folder), so ``--db`` has nothing to name there."""
    parser.add_argument("--output", "-o", type=Path, metavar="FILE.json",
                        help="also write the results JSON here")
    add_quiet_argument(parser, "no progress lines")


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """``--db PATH``, shared by every command that reads or writes the history."""
    parser.add_argument("--db", type=Path, default=None, metavar="PATH",
                        help="history database (default: history.sqlite in the accelbench data folder)")


def add_json_argument(parser: argparse.ArgumentParser,
                      help: str = "print the stored record as JSON (each case's figures by their "
                      "catalogue names: the values the table shows); nothing else on stdout") -> None:
    """``--json``: what a script reads instead of the table."""
    parser.add_argument("--json", action="store_true", help=help)


def add_quiet_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``--quiet``: the result only; ``help`` says what the command leaves out."""
    parser.add_argument("--quiet", "-q", action="store_true", help=help)
