"""The driver: one loop over a plan's cases for every subcommand.

Each case runs through its subcommand's :class:`~accelbench.engine.work.CaseWork` and the one
launcher the plan's :class:`~accelbench.engine.launchers.choose.LaunchPlan` asks for (inline, a
worker process, a warm worker, or torchrun: chosen in ``launchers/choose.py``); the record is
handed to ``on_case`` the moment a case ends (to be saved); SIGINT and SIGTERM stop the loop with
:class:`Interrupted`, which carries the finished cases and the interrupted one.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from accelbench.engine.launchers.base import Launcher, Progress
from accelbench.engine.launchers.choose import LaunchPlan, launcher_for
from accelbench.engine.progress import ItemProgress, progress_display
from accelbench.engine.repeat import interleaved, merge_repeats
from accelbench.engine.work import CaseWork
from accelbench.results import CaseResult, RunRecord
from accelbench.results.protocol_summary import mlperf_client_overall

Item = TypeVar("Item")
#: Phases the driver itself reports: a case started; a case ended (its status follows as phase).
STARTED = "running"
#: A plan whose cases run in this process.
INLINE = LaunchPlan()


class Terminated(BaseException):
    """SIGTERM arrived: like KeyboardInterrupt, it stops the plan after saving what finished."""


class Interrupted(Exception):
    """The plan was stopped by a signal; ``record`` holds the finished cases and the interrupted one."""

    def __init__(self, record: RunRecord, signal_name: str, exit_code: int) -> None:
        super().__init__(f"interrupted by {signal_name}")
        self.record, self.signal_name, self.exit_code = record, signal_name, exit_code


@contextlib.contextmanager
def terminate_as_exception() -> Iterator[None]:
    """Turn SIGTERM into the Terminated exception, so a plan saves what finished and exits 143.
    Signal handlers belong to the main thread; elsewhere (a notebook's worker thread) nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def saver(output: Path | None = None) -> Callable[[RunRecord], None]:
    """``on_case`` for a command: rewrite the record in the results folder (and ``-o``)."""
    from accelbench.store.jsonfile import save_record, save_to_results_dir

    def save(record: RunRecord) -> None:
        save_to_results_dir(record)
        if output is not None:
            save_record(record, output)
    return save


def drive(work: CaseWork[Item], items: Sequence[Item], record: RunRecord, *,
          launch: LaunchPlan = INLINE,
          progress: ItemProgress | None = None,
          on_case: Callable[[RunRecord], None] | None = None,
          repeat: int = 1, cooldown: float = 0.0, live: bool = False) -> RunRecord:
    """Run every item (``repeat`` times, in interleaved rounds) through the launcher ``launch``
    asks for (inline by default) and append its result to ``record``; later rounds merge their
    process into it (see ``accelbench.engine.repeat``).

    ``on_case`` gets the record after every case. SIGINT (KeyboardInterrupt) and SIGTERM
    (Terminated) raise Interrupted carrying the record, where the case that was running in
    round one is ``interrupted``. ``live`` shows the progress display (on a terminal), besides
    any ``progress`` callback.
    """
    with launcher_for(launch, work, items) as launcher, \
            progress_display([work.label(item) for item in items], quiet=not live) as display:
        return _drive(work, launcher, items, record, _both(progress, display), on_case, repeat,
                      cooldown)


def _both(first: ItemProgress | None, second: ItemProgress | None) -> ItemProgress | None:
    if first is None or second is None:
        return first or second

    def both(index: int, phase: str, done: float, total: float | None) -> None:
        first(index, phase, done, total)
        second(index, phase, done, total)
    return both


def _drive(work: CaseWork[Item], launcher: Launcher, items: Sequence[Item], record: RunRecord,
           progress: ItemProgress | None, on_case: Callable[[RunRecord], None] | None,
           repeat: int, cooldown: float) -> RunRecord:
    results = work.collection(record)
    first = len(results)
    processes: list[list[CaseResult]] = [[] for _ in items]
    #: (round, index, item) of the case under way, until its result is in the record.
    running: tuple[int, int, Item] | None = None
    with terminate_as_exception():
        try:
            for done, (round_index, index) in enumerate(interleaved(len(items), repeat)):
                item = items[index]
                if round_index and processes[index]:
                    item = work.next_round(item, processes[index][0])
                running = (round_index, index, item)
                if done and cooldown:
                    time.sleep(cooldown)
                if progress is not None:
                    progress(index, STARTED, 0.0, None)
                result = work.launch(launcher, item, _for_item(progress, index))
                processes[index].append(result)
                merged = merge_repeats(processes[index])
                if round_index:
                    results[first + index] = merged
                else:
                    results.append(merged)
                running = None
                # Figures across cases (MLPerf Client's overall), once the case is in.
                record.protocol_overall = mlperf_client_overall(record.cases) or None
                if progress is not None:
                    progress(index, getattr(merged, "status", "ok"), 1.0, 1.0)
                if on_case is not None:
                    on_case(record)
        except (KeyboardInterrupt, Terminated) as stop:
            name, code = ("SIGINT", 130) if isinstance(stop, KeyboardInterrupt) else ("SIGTERM", 143)
            if running is not None and running[0] == 0 and len(results) == first + running[1]:
                interrupted = work.interrupted(running[2], f"interrupted by {name}")
                if interrupted is not None:
                    results.append(interrupted)
            raise Interrupted(record, name, code) from None
    return record


def _for_item(progress: ItemProgress | None, index: int) -> Progress | None:
    if progress is None:
        return None

    def case_progress(phase: str, done: float, total: float | None) -> None:
        progress(index, phase, done, total)
    return case_progress
