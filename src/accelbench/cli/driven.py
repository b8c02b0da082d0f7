"""What every command that runs cases through the driver does around it (run, check, probe,
scale): save the record after every case, store it at the end (also when interrupted), show it,
and exit 0 / 1, or 130 / 143 after a signal."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from accelbench.cli.console import make_console, print_path
from accelbench.results import RunRecord
from accelbench.store.jsonfile import save_record
from accelbench.store.keep import store_everywhere

#: Runs the cases, handing the record to the callback after every case.
Drive = Callable[[Callable[[RunRecord], None]], RunRecord]
#: Shows the finished record, given where it was saved.
Show = Callable[[RunRecord, Path], None]


def show_json(record: RunRecord, saved: Path, output: Path | None = None,
              extra: dict[str, Any] | None = None) -> None:
    """``--json``: the record on stdout (render/json_views.record_view) with ``extra``'s members
    beside it, nothing else; where it was saved goes to stderr."""
    import sys

    from accelbench.render.json_views import dumps, record_view

    sys.stdout.write(dumps({**record_view(record), **(extra or {})}))
    notes = make_console(stderr=True, highlight=False)
    if output:
        print_path(notes, "Result written to", output)
    print_path(notes, "Saved to", saved)


def show_record(record: RunRecord, saved: Path, output: Path | None, as_json: bool,
                parts: Callable[[RunRecord], Iterable[Any]]) -> None:
    """A finished record as every command shows it: ``--json`` (stdout the JSON only), else the
    command's ``parts`` (tables and lines, built only when shown), then where it went."""
    if as_json:
        show_json(record, saved, output)
        return
    out = make_console()
    for part in parts(record):
        out.print(part)
    if output:
        print_path(out, "Result written to", output)
    print_path(out, "Saved to", saved)


def all_ok(record: RunRecord) -> int:
    return 0 if all(case.ok for case in record.cases) else 1


def run_driven(drive: Drive, output: Path | None, db: Path | None, show: Show,
               exit_code: Callable[[RunRecord], int] = all_ok) -> int:
    """Drive the cases; keep the record (results folder, ``-o``, history) and show it."""
    # Imported here: the engine imports torch, and the commands import this module while their
    # flags are parsed (a typo is reported before torch loads).
    from accelbench.engine.driver import Interrupted, saver

    try:
        record, stopped = drive(saver(output)), None
    except Interrupted as stop:
        record, stopped = stop.record, stop
    saved = store_everywhere(record, db)
    if output:
        save_record(record, output)
    show(record, saved)
    if stopped is not None:
        make_console(stderr=True).print(f"[yellow]Interrupted by {stopped.signal_name}: the finished "
                                   "cases are saved.[/yellow]")
        return stopped.exit_code
    return exit_code(record)
