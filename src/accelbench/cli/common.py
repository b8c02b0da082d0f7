"""Argument types and the parser that reports bad usage as one line with exit code 2."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from accelbench.errors import UsageError

#: What ``--debug`` does unless a command says more (its module's ``DEBUG_HELP``).
DEBUG_HELP = "show tracebacks instead of one line"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (no usage dump) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"accelbench: error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(2)


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
    parser.add_argument("--quiet", action="store_true", help="no live progress display")


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The same options for the commands that measure but keep nothing in the history (selftest,
    roofline: their figures go to the data folder), so ``--db`` has nothing to name there."""
    parser.add_argument("--output", "-o", type=Path, metavar="FILE.json",
                        help="also write the results JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
