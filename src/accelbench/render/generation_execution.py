"""How each generation case executed and which bound its decode hit, in words under the generation
table: the execution recipe (cache, what ran the prefill and the decode step, CUDA graphs:
measure/generation/recipe.py) and the decode bound (overhead- or bandwidth-bound, with its floor:
measure/generation/decode_bytes.judge_decode). Read from the stored sections, never recomputed."""

from __future__ import annotations

from accelbench.render.format import format_seconds
from accelbench.results import CaseResult, RunRecord
from accelbench.results.generation import Execution, Generation


def case_who(case: CaseResult) -> str:
    """A generation line's subject: "gpt2 cuda:0 bf16" (generation_detail.py names its cases so too)."""
    return f"{case.workload} {case.device} {case.precision}"


def execution_words(section: Execution | None) -> str:
    """"cache static, kept; prefill eager; decode compiled, fullgraph (inductor:reduce-overhead);
    CUDA graphs: captured (CUDA graphs)"; "" for a result without the section."""
    if section is None:
        return ""
    compile_text = section.compile or "not compiled"
    return (f"cache {section.kv_cache or '?'}; prefill {section.prefill or '?'}; decode "
            f"{section.decode or '?'} ({compile_text}); CUDA graphs: {section.cuda_graphs or '?'}")


def bound_words(generation: Generation) -> str:
    """"overhead-bound (host launches, <CPU>): 12x the bandwidth floor of 21 µs/token" or
    "bandwidth-bound: 64% of measured bandwidth (floor 0.4 ms/token)"; "" where not judged."""
    words, floor = generation.decode_bound_words, generation.decode_floor_s
    if words is None or floor is None:
        return ""
    return f"{words} (floor {format_seconds(floor)}/token)"


def short_bound(generation: Generation) -> str:
    """One word for a table cell: "overhead" or "bw-bound"; "" where not judged."""
    return {"overhead": "overhead", "bandwidth": "bw-bound"}.get(generation.decode_bound or "", "")


def execution_lines(record: RunRecord) -> list[str]:
    """One line per generation case with an execution section or a bound."""
    lines = []
    for case in record.cases:
        generation = case.generation if case.mode == "generate" else None
        if not case.ok or not generation:
            continue
        parts = [p for p in (execution_words(generation.execution), bound_words(generation)) if p]
        if parts:
            lines.append(f"  {case_who(case)}: {'; '.join(parts)}")
    return ["execution and decode bound (TPOT over 3x the bandwidth floor = overhead-bound):", *lines] \
        if lines else []
