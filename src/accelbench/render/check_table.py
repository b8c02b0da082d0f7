"""The parity verdicts of ``accelbench check``."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from accelbench.parity.shown import judged_label, verdict_of
from accelbench.render.table import config_label
from accelbench.results import CaseResult, Parity, RunRecord

_COLOURS = {"pass": "green", "drift": "yellow", "diverged": "red", "non-finite": "red",
            "inconclusive": "yellow", "failed": "red"}
#: The detail column's width; longer texts end in an ellipsis rather than mid-number.
_DETAIL = 80


def _detail(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= _DETAIL else line[: _DETAIL - 1].rstrip() + "…"


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def _generation_detail(case: CaseResult) -> str:
    """``check --mode generate``: what the verdict rests on (the tokens compared, the logits)."""
    parity = (case.generation or {}).get("parity")
    if not parity:
        return ""
    return str(parity.get("message") or "")


def check_table(record: RunRecord) -> Table:
    reference = record.options.get("reference", "?")
    table = Table(title=f"accelbench check {record.run_id}: candidate vs {reference}, "
                  f"{record.options.get('check_steps', '?')} training steps", title_justify="left")
    for column in ("workload", "device", "config", "batch", "verdict", "judged steps", "first bad step",
                   "max rel. loss diff", "output rel. diff", "tolerance pass/drift", "detail"):
        table.add_column(column)
    for case in record.cases:
        parity = case.parity or Parity("failed")
        tolerance = parity.tolerance
        verdict, judged = verdict_of(case), judged_label(case.parity)
        output = _number(parity.output_rel_diff)
        table.add_row(
            escape(case.workload), case.device, config_label(case), str(case.batch_size),
            f"[{_COLOURS.get(verdict, 'red')}]{verdict}[/]", judged,
            str(parity.first_bad_step or ""),
            _number(parity.max_rel_loss_diff),
            # Past the judged steps the output is reported, not judged: in parentheses.
            f"({output})" if judged and output else output,
            f"{tolerance.passed:g}/{tolerance.drift:g}" if tolerance else "",
            escape(_detail(case.error or _generation_detail(case))),
        )
    if any(judged_label(case.parity) for case in record.cases):
        table.caption = ("judged steps: those before the reference, re-run with a rounding of the "
                         "candidate precision's size every step, left the pass tolerance; later "
                         "steps amplify rounding and cannot tell a device's error from it")
        table.caption_justify = "left"
    return table
