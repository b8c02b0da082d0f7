"""Argument types and the parser that reports bad usage as one line with exit code 2."""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
from collections.abc import Iterator
from typing import NoReturn

from accelbench.errors import UsageError


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


def positive_int(text: str) -> int:
    value = int(_number(text.strip(), int, "a whole number"))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive whole number")
    if value > 10**9:
        raise argparse.ArgumentTypeError(f"{text!r} is too large (at most 1000000000)")
    return value


def non_negative_int(text: str) -> int:
    value = int(_number(text.strip(), int, "a whole number"))
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    if value > 10**9:
        raise argparse.ArgumentTypeError(f"{text!r} is too large (at most 1000000000)")
    return value


def positive_float(text: str) -> float:
    value = float(_number(text.strip(), float, "a number"))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number")
    if value > 1e7:
        raise argparse.ArgumentTypeError(f"{text!r} is too large (at most 10000000)")
    return value


def non_negative_float(text: str) -> float:
    value = float(_number(text.strip(), float, "a number"))
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    if value > 1e7:
        raise argparse.ArgumentTypeError(f"{text!r} is too large (at most 10000000)")
    return value


@contextlib.contextmanager
def terminate_as_exception() -> Iterator[None]:
    """Turn SIGTERM into the Terminated exception, so a run saves what finished and exits 143."""
    from accelbench.runner import Terminated

    def handler(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def comma_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def fail(message: str) -> NoReturn:
    raise UsageError(message)
