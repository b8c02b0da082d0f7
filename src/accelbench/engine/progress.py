"""The one live progress display: a line per case with its phase and a bar, on stderr, only where
stderr is a terminal (a pipe or a CI log gets nothing) and not with --quiet."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

#: Progress of the case at this index of the plan: (index, phase, done, total or None).
ItemProgress = Callable[[int, str, float, "float | None"], None]

#: Phases whose done/total is not the case's progress (warm-up counts steps before measuring).
_NO_BAR = ("warm-up",)


@contextlib.contextmanager
def progress_display(labels: Sequence[str], console: Console | None = None,
                     quiet: bool = False) -> Iterator[ItemProgress | None]:
    """Yield a ``progress`` callback for these cases (None when nothing is shown)."""
    console = console or Console(stderr=True)
    if quiet or not (console.is_terminal or sys.stderr.isatty()):
        yield None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[phase]}"),
                  TimeElapsedColumn(), console=console, transient=True) as display:
        tasks = [display.add_task(label, total=1.0, phase="queued") for label in labels]

        def update(index: int, phase: str, done: float, total: float | None) -> None:
            fraction = min(done / total, 1.0) if total and phase not in _NO_BAR else 0.0
            display.update(tasks[index], completed=fraction, phase=phase)

        yield update
