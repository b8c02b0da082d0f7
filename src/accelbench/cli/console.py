"""The one console every command prints through, and the width it lays its tables out for.

The width is ``COLUMNS`` where it is set (a pipe into ``less`` or ``tee``, a CI log that says its
width), else the terminal's where stdin, stdout or stderr is one (``accelbench run | less`` in a
terminal: the terminal the pipe ends in), else ``DEFAULT_WIDTH`` (a log with no terminal at all).
Never a fixed width that ignores what the reader asked for.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

#: The width where neither ``COLUMNS`` nor a terminal says one: the width the docs' samples use.
DEFAULT_WIDTH = 100


def output_width() -> int | None:
    """The columns to lay out for: ``COLUMNS``, else None (the terminal's, as rich asks it), else
    ``DEFAULT_WIDTH``."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for stream in (sys.stdout, sys.stderr, sys.stdin):
        try:
            os.get_terminal_size(stream.fileno())
        except (AttributeError, ValueError, OSError):  # closed, replaced or not a terminal
            continue
        return None
    return DEFAULT_WIDTH


def make_console(*, stderr: bool = False, quiet: bool = False, highlight: bool = True) -> Console:
    """A console on stdout (or ``stderr``) at ``output_width``."""
    from rich.console import Console

    return Console(width=output_width(), stderr=stderr, quiet=quiet, highlight=highlight)


def print_path(console: Console, label: str, path: object) -> None:
    """``label path`` on one line where it fits, else the label alone and the path on the next
    line: whole where it fits the width (a path is copied), folded only where it is wider than a
    line itself; no line ends in a blank."""
    line = f"{label} {path}"
    if len(line) <= console.width:
        console.print(line, highlight=False, soft_wrap=True)
    else:
        console.print(label, highlight=False)
        console.print(str(path), highlight=False, overflow="fold")
