"""The parity verdicts of ``accelbench check``."""

from __future__ import annotations

from rich.text import Text

from accelbench.options.recorded import RecordedCheck
from accelbench.parity.shown import judged_label, verdict_of
from accelbench.render.fit import FittedTable
from accelbench.render.table import config_label
from accelbench.results import CaseResult, Parity, RunRecord

_COLOURS = {"pass": "green", "drift": "yellow", "diverged": "red", "non-finite": "red",
            "inconclusive": "yellow", "failed": "red"}
COLUMNS = ("workload", "device", "config", "batch", "verdict", "judged steps", "first bad step",
           "max rel. loss diff", "output rel. diff", "tolerance pass/drift", "detail")
#: Figures: never wrapped (an exponent is the whole figure).
_WHOLE = ("batch", "judged steps", "first bad step", "max rel. loss diff", "output rel. diff",
          "tolerance pass/drift")
JUDGED_NOTE = ("judged steps: those before the reference, re-run with a rounding of the "
               "candidate precision's size every step, left the pass tolerance; later "
               "steps amplify rounding and cannot tell a device's error from it")


def _detail(text: str) -> str:
    """The first line in full: the table wraps it between words."""
    return text.splitlines()[0] if text else ""


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def _generation_detail(case: CaseResult) -> str:
    """``check --mode generate``: what the verdict rests on (the tokens compared, the logits)."""
    parity = case.generation.parity if case.generation else None
    if parity is None:
        return ""
    if parity.quality and parity.verdict_message:
        # The quantized quality is printed in full under the table (generation_detail.quality_lines).
        return f"{parity.verdict_message}; quantized: kernel, agreement and KL below the table"
    return parity.message


def check_row(case: CaseResult) -> list[str | Text]:
    """One case's cells, as the table shows them (and ``check --json`` names them)."""
    parity = case.parity or Parity("failed")
    tolerance = parity.tolerance
    verdict, judged = verdict_of(case), judged_label(case.parity)
    output = _number(parity.output_rel_diff)
    return [case.workload, case.device, config_label(case), str(case.batch_size),
            Text(verdict, style=_COLOURS.get(verdict, "red")), judged,
            str(parity.first_bad_step or ""), _number(parity.max_rel_loss_diff),
            # Past the judged steps the output is reported, not judged: in parentheses.
            f"({output})" if judged and output else output,
            f"{tolerance.passed:g}/{tolerance.drift:g}" if tolerance else "",
            # The verdict is its own cell: the detail says what it rests on, not the word again.
            _detail(case.error or _generation_detail(case)).removeprefix(f"{verdict}: ")]


def checked_words(record: RunRecord) -> str:
    """What the check ran: "50 training steps", "32 tokens greedy after a 32-token prompt" (a
    generation check: its tokens against the reference's), or both."""
    parts = []
    if any(case.mode != "generate" for case in record.cases):
        options = record.options
        steps = options.check_steps if isinstance(options, RecordedCheck) else "?"
        parts.append(f"{steps} training steps")
    shapes = dict.fromkeys((case.new_tokens, case.prompt_len) for case in record.cases
                           if case.mode == "generate")
    if len(shapes) == 1:
        ((new, prompt),) = shapes
        parts.append(f"{new} tokens greedy after a {prompt}-token prompt, against the reference's")
    elif shapes:
        parts.append("greedy tokens against the reference's (lengths per row)")
    return "; ".join(parts)


def check_table(record: RunRecord) -> FittedTable:
    reference = record.options.reference if isinstance(record.options, RecordedCheck) else "?"
    notes = [JUDGED_NOTE] if any(judged_label(case.parity) for case in record.cases) else []
    return FittedTable(f"accelbench check {record.run_id}: candidate vs {reference}, "
                       f"{checked_words(record)}", COLUMNS,
                       [check_row(case) for case in record.cases], whole=_WHOLE,
                       stack=("workload", "device"), notes=notes)
