"""The parity verdicts of ``accelbench check``."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from accelbench.render.table import config_label
from accelbench.results import Parity, RunRecord

_COLOURS = {"pass": "green", "drift": "yellow", "diverged": "red", "non-finite": "red",
            "failed": "red"}


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def check_table(record: RunRecord) -> Table:
    reference = record.options.get("reference", "?")
    table = Table(title=f"accelbench check {record.run_id}: candidate vs {reference}, "
                  f"{record.options.get('check_steps', '?')} training steps", title_justify="left")
    for column in ("workload", "device", "config", "batch", "verdict", "first bad step",
                   "max rel. loss diff", "output rel. diff", "tolerance pass/drift", "detail"):
        table.add_column(column)
    for case in record.cases:
        parity = case.parity or Parity("failed")
        tolerance = parity.tolerance
        table.add_row(
            escape(case.workload), case.device, config_label(case), str(case.batch_size),
            f"[{_COLOURS.get(parity.verdict, 'red')}]{parity.verdict}[/]",
            str(parity.first_bad_step or ""),
            _number(parity.max_rel_loss_diff), _number(parity.output_rel_diff),
            f"{tolerance.passed:g}/{tolerance.drift:g}" if tolerance else "",
            escape(case.error.splitlines()[0][:80]) if case.error else "",
        )
    return table
