"""What ``accelbench run`` prints for a record, in order, as one list: the command and
``print(result)`` from the Python API (render/notebook.record_text) show the same thing."""

from __future__ import annotations

import dataclasses

from rich.console import RenderableType

from accelbench.render.fit import Prose
from accelbench.render.generation_table import generation_cases, generation_notes, generation_table
from accelbench.render.steady import break_even_lines, sustained_lines
from accelbench.render.table import busy_line, diagnosis_lines, energy_lines, run_table
from accelbench.results import RunRecord


def run_renderables(record: RunRecord, wide: bool = False) -> list[RenderableType]:
    """The run table (training and evaluation; also a run with no case at all), the generation
    table with its notes, then the lines under them: a busy machine (said once: every figure
    above is affected), profiles' diagnoses, energy, sustained speed and compile break-even."""
    generated = generation_cases(record)
    steps = dataclasses.replace(record, cases=[c for c in record.cases if c.mode != "generate"])
    parts: list[RenderableType] = [run_table(steps, wide)] if steps.cases or not generated else []
    if generated:
        parts += [generation_table(record, wide), *(Prose(line, "dim") for line in generation_notes(record))]
    parts += [Prose(line) for line in filter(None, [busy_line(record), *diagnosis_lines(record)])]
    parts += [Prose(line, "dim") for line in energy_lines(record)]
    return parts + [Prose(line) for line in [*sustained_lines(record), *break_even_lines(record)]]
