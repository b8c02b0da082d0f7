"""How each generation case executed and which bound its decode hit, in words under the generation
table: the execution recipe (cache, what ran the prefill and the decode step, CUDA graphs:
measure/generation/recipe.py) and the decode bound (overhead- or bandwidth-bound, with its floor:
measure/generation/decode_bytes.judge_decode). Read from the stored sections, never recomputed."""

from __future__ import annotations

from typing import Any

from accelbench.render.format import format_seconds
from accelbench.results import CaseResult, RunRecord


def _who(case: CaseResult) -> str:
    return f"{case.workload} {case.device} {case.precision}"


def execution_words(section: Any) -> str:
    """"cache static, kept; prefill eager; decode compiled, fullgraph (inductor:reduce-overhead);
    CUDA graphs: captured (CUDA graphs)"; "" for a result without the section."""
    if not isinstance(section, dict):
        return ""
    compile_text = section.get("compile") or "not compiled"
    return (f"cache {section.get('kv_cache', '?')}; prefill {section.get('prefill', '?')}; decode "
            f"{section.get('decode', '?')} ({compile_text}); CUDA graphs: "
            f"{section.get('cuda_graphs', '?')}")


def bound_words(generation: dict[str, Any]) -> str:
    """"overhead-bound (host launches, <CPU>): 12x the bandwidth floor of 21 µs/token" or
    "bandwidth-bound: 64% of measured bandwidth (floor 0.4 ms/token)"; "" where not judged."""
    words, floor = generation.get("decode_bound_words"), generation.get("decode_floor_s")
    if not isinstance(words, str) or not isinstance(floor, int | float):
        return ""
    return f"{words} (floor {format_seconds(floor)}/token)"


def short_bound(generation: dict[str, Any]) -> str:
    """One word for a table cell: "overhead" or "bw-bound"; "" where not judged."""
    bound = generation.get("decode_bound")
    return {"overhead": "overhead", "bandwidth": "bw-bound"}.get(str(bound), "")


def execution_lines(record: RunRecord) -> list[str]:
    """One line per generation case with an execution section or a bound."""
    lines = []
    for case in record.cases:
        generation = case.generation if case.mode == "generate" else None
        if not case.ok or not generation:
            continue
        parts = [p for p in (execution_words(generation.get("execution")), bound_words(generation)) if p]
        if parts:
            lines.append(f"  {_who(case)}: {'; '.join(parts)}")
    return ["execution and decode bound (TPOT over 3x the bandwidth floor = overhead-bound):", *lines] \
        if lines else []
