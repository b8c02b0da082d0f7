""""What will be shared": a bundle's lines as a table, for ``share --dry-run`` and for the
confirmation of a submission to a hub (``share --push``).

A group of lines that carries figures across cases (an MLPerf Client run's categories, each
line with its run's stored overall geometric means) gets a row of its own in a second table, in
the cells compare's table of them uses: the figures as the lines carry them, never recomputed."""

from __future__ import annotations

from collections import Counter

from rich.console import Group

from accelbench.hub.push import Row, Submission
from accelbench.render.fit import FittedTable, Prose
from accelbench.render.format import format_rate
from accelbench.render.generation_detail import OVERALL_COLUMNS, overall_group_rows
from accelbench.results.protocol_overall import Overall

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


#: The overall table's columns: how many of the bundle's lines carry the group, then compare's.
SHARED_OVERALL_COLUMNS = ("lines", *OVERALL_COLUMNS[1:])


def overall_table(sub: Submission) -> FittedTable | None:
    """One row per group of lines carrying figures across cases (the ``overall`` section: its
    group id and figures tell the group apart), as the lines carry them; None where no line
    carries any."""
    groups: Counter[tuple[str, Overall]] = Counter()
    for row in sub.rows:
        if row.overall is not None:
            groups[(row.overall_group, row.overall)] += 1
    cells = overall_group_rows([(str(count), overall) for (_, overall), count in groups.items()])
    if not cells:
        return None
    return FittedTable("Figures across cases each group's lines carry (MLPerf Client's overall, as stored "
                       "with its run)", SHARED_OVERALL_COLUMNS, cells, right=SHARED_OVERALL_COLUMNS[2:])


def _tables(title: str, sub: Submission) -> list[FittedTable]:
    overall = overall_table(sub)
    return [lines_table(title, sub), *([overall] if overall is not None else [])]


def submission_renderable(target: str, sub: Submission) -> Group:
    """Where it goes, the file and its size, one row per line of the bundle, and the figures
    across cases its groups of lines carry."""
    title = (f"to {target}: {sub.path} ({sub.lines} line(s), {len(sub.text.encode('utf-8')):,} bytes, "
             f"machine {sub.machine_id})")
    note = Prose("every line as sent: accelbench share --dry-run --json (the same runs)", "dim")
    return Group(*_tables(title, sub), note)


def dry_run_renderable(sub: Submission) -> Group:
    """``share --dry-run``: what would be shared, readable; the lines themselves with --json."""
    title = (f"would be shared: {sub.lines} line(s), {len(sub.text.encode('utf-8')):,} bytes, "
             f"as machine {sub.machine_id}")
    note = Prose("every line as it would be written: accelbench share --dry-run --json (the same "
                 "runs)", "dim")
    return Group(*_tables(title, sub), note)
