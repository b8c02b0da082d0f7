""""What will be shared": a bundle's lines as a table, for ``share --dry-run`` and for the
confirmation of a submission to a hub (``share --push``)."""

from __future__ import annotations

from rich.console import Group

from accelbench.hub.push import Row, Submission
from accelbench.render.fit import FittedTable, Prose
from accelbench.render.format import format_rate

COLUMNS = ("workload", "mode", "configuration", "device model", "rate", "unit", "status")


def _cells(row: Row) -> list[str]:
    """The rate and its unit; a line without one says so under "status", never a status as a
    unit ("ok" beside an empty rate): a case that did not finish, or one that finished with no
    headline figure in its line (an older bundle's)."""
    if row.rate is not None:
        return [format_rate(row.rate), row.unit, ""]
    return ["n/a", "", "ok, no rate in the line" if row.unit == "ok" else row.unit or "unknown"]


def lines_table(title: str, sub: Submission) -> FittedTable:
    """One row per line of the bundle: the work, the device model and the headline rate (or,
    under status, why there is none)."""
    rows = [[row.workload, row.mode, row.config, row.device_model, *_cells(row)] for row in sub.rows]
    return FittedTable(title, COLUMNS, rows, right=("rate",), stack=("workload", "mode"))


def submission_renderable(target: str, sub: Submission) -> Group:
    """Where it goes, the file and its size, and one row per line of the bundle."""
    title = (f"to {target}: {sub.path} ({sub.lines} line(s), {len(sub.text.encode('utf-8')):,} bytes, "
             f"machine {sub.machine_id})")
    note = Prose("every line as sent: accelbench share --dry-run --json (the same runs)", "dim")
    return Group(lines_table(title, sub), note)


def dry_run_renderable(sub: Submission) -> Group:
    """``share --dry-run``: what would be shared, readable; the lines themselves with --json."""
    title = (f"would be shared: {sub.lines} line(s), {len(sub.text.encode('utf-8')):,} bytes, "
             f"as machine {sub.machine_id}")
    note = Prose("every line as it would be written: accelbench share --dry-run --json (the same "
                 "runs)", "dim")
    return Group(lines_table(title, sub), note)
