"""The one live progress display: a line per case with its phase and a bar, on stderr, only where
stderr is a terminal (a pipe or a CI log gets nothing) and not with --quiet.

Above the cases, a line says where the run is: "case 3 of 9 · 1:05 elapsed · about 2:40 left"
(``Tally``: the estimate is the finished cases' mean duration times what is left). A case's own
clock starts when the case does: a queued row shows no time at all.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn
from rich.text import Text

from accelbench.results.probe import PROBE_STATUSES
from accelbench.results.records import STATUSES

#: Progress of the case at this index of the plan: (index, phase, done, total or None).
ItemProgress = Callable[[int, str, float, "float | None"], None]

#: Phases whose done/total is not the case's progress (warm-up counts steps before measuring).
_NO_BAR = ("warm-up",)
#: A case's last phase is its status (engine/driver.py reports it when the case ends).
_ENDS = frozenset((*STATUSES, *PROBE_STATUSES))


def clock_text(seconds: float) -> str:
    """m:ss, or h:mm:ss from an hour."""
    whole = max(int(seconds + 0.5), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Tally:
    """Where a run is, from its cases' phases, on a clock the caller may hand in (tests do)."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.clock = total, clock
        self.start = clock()
        self.started: dict[int, float] = {}
        self.finished: dict[int, float] = {}

    def update(self, index: int, phase: str) -> None:
        """A case's phase: its first starts its clock, a status ends it (a later round of
        ``--repeat`` starts it again)."""
        now = self.clock()
        if phase in _ENDS:
            self.finished[index] = now - self.started.get(index, now)
            self.started.pop(index, None)
        elif index not in self.started:
            self.started[index] = now

    def left(self) -> float | None:
        """Seconds the cases not yet finished will take at the finished ones' mean (the running
        ones less what they have run); None before any case has finished."""
        if not self.finished:
            return None
        mean = sum(self.finished.values()) / len(self.finished)
        now = self.clock()
        running = sum(min(now - start, mean) for start in self.started.values())
        return max(mean * (self.total - len(self.finished)) - running, 0.0)

    def line(self) -> str:
        """"case 3 of 9 · 1:05 elapsed · about 2:40 left"."""
        under_way = min(len(self.finished) + max(len(self.started), 1), self.total)
        text = f"case {under_way} of {self.total} · {clock_text(self.clock() - self.start)} elapsed"
        left = self.left()
        if left is not None and len(self.finished) < self.total:
            text += f" · about {clock_text(left)} left"
        return text


class _Label(ProgressColumn):
    """The run's line on the first row (read at every refresh, so its clock moves), then each
    case's label."""

    def __init__(self, tally: Tally) -> None:
        super().__init__()
        self.tally = tally

    def render(self, task: Task) -> Text:
        if task.fields.get("summary"):
            return Text(self.tally.line(), style="bold")
        return Text(task.description)


class _Clock(ProgressColumn):
    """A case's time since it started; nothing while it is queued (nor on the run's row)."""

    def render(self, task: Task) -> Text:
        elapsed = None if task.fields.get("summary") else (
            task.finished_time if task.finished else task.elapsed)
        return Text("" if elapsed is None else clock_text(elapsed), style="progress.elapsed")


@contextlib.contextmanager
def progress_display(labels: Sequence[str], console: Console | None = None,
                     quiet: bool = False,
                     clock: Callable[[], float] = time.monotonic) -> Iterator[ItemProgress | None]:
    """Yield a ``progress`` callback for these cases (None when nothing is shown)."""
    console = console or Console(stderr=True)
    if quiet or not (console.is_terminal or sys.stderr.isatty()):
        yield None
        return
    tally = Tally(len(labels), clock)
    with Progress(_Label(tally), BarColumn(), TextColumn("{task.fields[phase]}"), _Clock(),
                  console=console, transient=True, get_time=clock) as display:
        summary = display.add_task("", total=float(len(labels) or 1), phase="", summary=True)
        tasks = [display.add_task(label, total=1.0, phase="queued", start=False) for label in labels]

        def update(index: int, phase: str, done: float, total: float | None) -> None:
            tally.update(index, phase)
            task = tasks[index]
            if phase in _ENDS:
                display.update(task, completed=1.0, phase=phase)
                display.stop_task(task)
            else:
                display.start_task(task)
                fraction = min(done / total, 1.0) if total and phase not in _NO_BAR else 0.0
                display.update(task, completed=fraction, phase=phase)
            display.update(summary, completed=float(len(tally.finished)))

        yield update
