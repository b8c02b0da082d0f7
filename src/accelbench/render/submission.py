""""What will be sent": a submission to a hub (``share --push``) as the confirmation shows it."""

from __future__ import annotations

from rich.console import Group

from accelbench.hub.push import Submission
from accelbench.render.fit import FittedTable, Prose
from accelbench.render.format import format_rate

COLUMNS = ("workload", "mode", "configuration", "device model", "rate", "unit")


def submission_renderable(target: str, sub: Submission) -> Group:
    """Where it goes, the file and its size, and one row per line of the bundle."""
    rows = [[row.workload, row.mode, row.config, row.device_model,
             format_rate(row.rate) if row.rate is not None else "", row.unit] for row in sub.rows]
    title = (f"to {target}: {sub.path} ({sub.lines} line(s), {len(sub.text.encode('utf-8')):,} bytes, "
             f"machine {sub.machine_id})")
    note = Prose("every line as sent: accelbench share --dry-run --json (the same runs)", "dim")
    return Group(FittedTable(title, COLUMNS, rows, right=("rate",), stack=("workload", "mode")), note)
