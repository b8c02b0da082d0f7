"""The per-process figure: the unit that ``compare``'s verdicts judge and a shared bundle carries.

Each ``--repeat`` process of a case is one independent measurement (``CaseResult.repeats``); its
figure is a low percentile of its step times (see compare/verdict.py for why the lower tail and
not the median).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from accelbench.results.records import CaseResult

#: The per-process figure compare judges: this percentile of the process's step times.
PROCESS_PERCENTILE = 10


def process_figure(step_times: Sequence[float]) -> float:
    """One process's figure for verdicts: the PROCESS_PERCENTILE-th percentile of its step times."""
    return float(np.percentile(step_times, PROCESS_PERCENTILE))


def process_step_times(case: CaseResult) -> list[float]:
    """The unit of comparison: each finished process's figure (seconds; ``process_figure``).

    A result without repeats is one process (its own samples). A generation case's figure is
    B / its rate (results/catalogue.headline): its TPOT, the statistic its decode rate is, or the
    time per token of a --protocol case's own rate (llama-bench's pp or tg ...; each process's own
    with --repeat), so a verdict judges the figure its rows show."""
    if case.mode == "generate":
        rates = [r.protocol_rate for r in case.repeats if r.ok and r.protocol_rate] if case.protocol else []
        if rates:  # each process's own protocol figure, as time per token
            return [case.batch_size / rate for rate in rates]
        if case.repeats:
            return [float(r.tpot_s) for r in case.repeats if r.ok and r.tpot_s is not None]
        rate = case.throughput()
        return [case.batch_size / rate] if rate else []
    if case.repeats:
        return [process_figure(r.step_times) if r.step_times else float(r.median_step_s or 0.0)
                for r in case.repeats if r.ok and (r.step_times or r.median_step_s)]
    return [process_figure(case.step_times)] if case.step_times else []
