"""A generation case's ``generation`` section, typed: the figures of its timed rounds
(``measure/generation/rounds.GenerationFigures``), the bandwidth judgement and the decode bound
(``measure/generation/decode_bytes``), the weights' memory, the weight-only quantization, the
protocol's figures (``--protocol``), the tokens' check, MLPerf Inference's interactive budget, the
execution recipe, and for ``check --mode generate`` the parity verdict (:class:`TokenParity`, which
parity/generation.py builds). The quantization and execution records are declared where they are
made, torch-free (``measure/generation/quantization.py``, ``execution.py``), and held here as they are.

The file keeps the section as it always had it: one flat object with the nested sections beside
the figures. Fields are grouped (``present``): a group is written only where one of its fields is
set, so a case without decode steps has no bound, a check's section holds its parity alone, and a
section a case does not have is absent rather than null, as before. Read leniently, as every
stored record (``results/validate.build``): a key no field holds is skipped, a field a file from
before lacks takes None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.measure.generation.execution import Execution
from accelbench.measure.generation.quantization import Quantization
from accelbench.results.stats import geometric_ci, mean_ci
from accelbench.results.validate import Record, dump

#: The metadata key naming a field's group (see :func:`present`).
GROUP = "present_with"


def present(group: str = "") -> Any:
    """A field written only where it, or another field of its ``group``, is set (not None)."""
    return field(default=None, metadata={GROUP: group})


def dump_present(value: Any) -> dict[str, Any]:
    """The JSON form of a record whose groups (:func:`present`) are left out where unset, and so
    of the records of that kind it holds."""
    data: dict[str, Any] = dump(value)
    groups: dict[str, list[str]] = {}
    for spec in dataclasses.fields(value):
        if isinstance(getattr(value, spec.name), Sparse):
            data[spec.name] = dump_present(getattr(value, spec.name))
        if GROUP in spec.metadata:
            groups.setdefault(spec.metadata[GROUP] or spec.name, []).append(spec.name)
    for names in groups.values():
        if all(getattr(value, name) is None for name in names):
            for name in names:
                del data[name]
    return data


class Sparse(Record):
    """A record with groups of fields written only where set (:func:`dump_present`)."""

    def to_dict(self) -> dict[str, Any]:
        return dump_present(self)


@dataclass(frozen=True)
class Round(Record):
    """One generation as the file keeps it (measure/generation/generation_clocks.GenerationRound)."""

    ttft_s: float
    decode_s: float
    token_times_s: list[float] = field(default_factory=list)
    windows: list[tuple[int, float]] = field(default_factory=list)


@dataclass(frozen=True)
class ProtocolSection(Sparse):
    """``--protocol``: which test of which protocol the case ran and its figures as the peer
    defines them (measure/generation/protocols.protocol_figures)."""

    name: str
    test: str
    label: str = ""
    #: What the test reports: "pp", "tg", "decode" (gpt-fast) or "category" (MLPerf Client).
    figure: str = ""
    scaled_from: str | None = None
    rounds: int = 0
    clock: str = ""
    timing_method: str = ""
    #: pp, tg and gpt-fast: the mean of the per-repetition rates, their sd, and the rates.
    tokens_per_s: float | None = present("rates")
    tokens_per_s_sd: float | None = present("rates")
    samples_tokens_per_s: list[float] | None = present("rates")
    #: gpt-fast: the weight bytes a decode step reads x tokens/s.
    bandwidth_bytes_per_s: float | None = present("bandwidth")
    bandwidth_counted: str | None = present("bandwidth")
    #: MLPerf Client: the mean TTFT and the 2nd+ token rate.
    ttft_mean_s: float | None = present()
    token_rate: float | None = present()


@dataclass(frozen=True)
class TokenCheck(Record):
    """The tokens' hash against the one shipped for the case (reference/expected_tokens.token_check)."""

    hash: str
    expected_hash: str | None = None
    #: "exact", "differs", or "no reference shipped".
    match: str = ""
    first_difference: int | None = None
    precision: str = ""
    verdict: str | None = None
    reference_margin: float | None = None
    tie_tolerance: float | None = None
    reference: str = ""
    hashed: str = ""


@dataclass(frozen=True)
class InteractiveBudget(Record):
    """MLPerf Inference's interactive budget, where a Llama-3.1-8B-shaped model ran
    (measure/generation/protocols.interactive_budget)."""

    shape: str
    ttft_p99_s: float
    tpot_p99_s: float | None
    ttft_budget_s: float
    tpot_budget_s: float
    meets: bool
    meets_ttft: bool
    meets_tpot: bool
    rounds: int
    source: str = ""


@dataclass(frozen=True)
class TokenParity(Record):
    """``check --mode generate``'s verdict (parity/generation.py judges and builds it): the greedy
    tokens and logits against the CPU reference's."""

    verdict: str
    precision: str = ""
    #: The tolerance's "pass" and "drift" bounds.
    tolerance: dict[str, float] = field(default_factory=dict)
    #: New tokens per sequence compared.
    new_tokens: int = 0
    #: The first position (0 = the first new token) where the greedy tokens differ, and in which
    #: sequence; for a logit-only divergence, the first position beyond ``drift``; None on a pass.
    position: int | None = None
    sequence: int | None = None
    reference_token: int | None = None
    candidate_token: int | None = None
    #: Reference's best logit minus its logit of the candidate's token, at ``position`` ...
    reference_gap: float | None = None
    #: ... and the gap that counts as a near tie there (``pass`` x the position's scale).
    tie_tolerance: float | None = None
    #: The largest relative logit difference over the compared positions, and where it was.
    max_logit_diff: float = 0.0
    max_logit_diff_position: int | None = None
    error: str = ""
    #: What the candidate was held against (``--reference``: cpu-fp64 or cpu, float32).
    reference: str = ""
    #: A weight-only quantized candidate (int8-wo, int4-wo): its tokens against the bf16 path's
    #: and the reference's (parity/quantized.py); None for the other precisions.
    quality: dict[str, Any] | None = None
    #: The verdict in words, with the quality's after it where there is one ...
    message: str = ""
    #: ... and the verdict's words alone (the check table's cell).
    verdict_message: str = ""


#: The figures of the timed rounds: written together, or (a check's section) not at all.
_FIGURES = "figures"


@dataclass
class Generation(Sparse):
    """A generation case's section (see the module docstring); every field None where the case
    has no such figure."""

    # --- the timed rounds' figures (GenerationFigures.to_dict) ---------------------------------
    batch_size: int | None = present(_FIGURES)
    prompt_len: int | None = present(_FIGURES)
    new_tokens: int | None = present(_FIGURES)
    timing_method: str | None = present(_FIGURES)
    warmup_rounds: int | None = present(_FIGURES)
    window_tokens: int | None = present(_FIGURES)
    ttft_s: float | None = present(_FIGURES)
    ttft_p90_s: float | None = present(_FIGURES)
    ttft_p99_s: float | None = present(_FIGURES)
    tpot_s: float | None = present(_FIGURES)
    tpot_p99_s: float | None = present(_FIGURES)
    #: The median TPOT's 95% interval across rounds.
    tpot_ci_s: tuple[float, float] | None = present(_FIGURES)
    prefill_tokens_per_s: float | None = present(_FIGURES)
    decode_tokens_per_s: float | None = present(_FIGURES)
    decode_tokens_per_s_total: float | None = present(_FIGURES)
    e2e_s: float | None = present(_FIGURES)
    output_tokens_per_s: float | None = present(_FIGURES)
    itl_median_s: float | None = present(_FIGURES)
    itl_p99_s: float | None = present(_FIGURES)
    kv_cache_bytes: int | None = present(_FIGURES)
    weight_bytes_per_step: int | None = present(_FIGURES)
    cache_bytes_per_step: int | None = present(_FIGURES)
    bytes_per_step: int | None = present(_FIGURES)
    bytes_counted: str | None = present(_FIGURES)
    effective_bandwidth_bytes_per_s: float | None = present(_FIGURES)
    peak_memory_bytes: int | None = present(_FIGURES)
    rounds: list[Round] | None = present(_FIGURES)
    warmup: list[Round] | None = present(_FIGURES)
    streamed: bool | None = present(_FIGURES)
    weight_reads: dict[str, int] | None = present(_FIGURES)
    kv_element_bytes: float | None = present(_FIGURES)
    stop_reason: str | None = present(_FIGURES)
    #: What each tail figure is ("p99 of 120", "max of 12").
    tail_statistics: dict[str, str] | None = present(_FIGURES)
    round_spread: float | None = present(_FIGURES)
    noisy: bool | None = present(_FIGURES)
    # --- against the measured bandwidth (decode_bytes.decode_judgements) ------------------------
    bandwidth_reference_bytes_per_s: float | None = present("bandwidth")
    bandwidth_share: float | None = present("bandwidth")
    bandwidth_verdict: str | None = present("bandwidth")
    #: Where the bandwidth came from, the last-level cache, and the bound (judge_decode).
    bandwidth_reference_source: str | None = present("bound")
    last_level_cache_bytes: int | None = present("bound")
    decode_bound: str | None = present("bound")
    decode_floor_s: float | None = present("bound")
    decode_floor_ratio: float | None = present("bound")
    decode_bound_words: str | None = present("bound")
    host_cpu: str | None = present("bound")
    # --- beside the figures (engine/generation_sections.py) ------------------------------------
    weights_memory_bytes: int | None = present()
    quantization: Quantization | None = present()
    protocol: ProtocolSection | None = present()
    tokens: TokenCheck | None = present()
    #: The token check's facts flat, as a shared line carries them (sharing/build.py TOKEN_FACTS).
    tokens_hash: str | None = present()
    tokens_reference_hash: str | None = present("reference")
    tokens_match: bool | None = present("reference")
    tokens_verdict: str | None = present("reference")
    tokens_first_difference: int | None = present("difference")
    tokens_reference_margin: float | None = present("difference")
    mlperf_interactive: InteractiveBudget | None = present()
    execution: Execution | None = present()
    #: ``check --mode generate``: the parity verdict (the section's only field there).
    parity: TokenParity | None = present()


def protocol_rate_ci(generation: Generation | None,
                     process_rates: Sequence[float] = ()) -> tuple[float, float] | None:
    """The 95% interval of a --protocol case's rate (its catalogue headline), of the statistic it
    is: the mean of the per-repetition rates (llama-bench, gpt-fast), or 1 / the mean of the
    iterations' time per token after the first (MLPerf Client's 2nd+ token rate). With
    ``--repeat`` (two or more ``process_rates``, each process's own protocol figure) the interval
    is across the processes (their geometric mean's), as a re-run would see it; else across the
    rounds. None with fewer than two rounds, or a section without them."""
    section = generation.protocol if generation else None
    if generation is None or section is None:
        return None
    if len(process_rates) >= 2:  # on logarithms, as a step case's processes (CaseResult.throughput_ci)
        return geometric_ci([float(r) for r in process_rates])
    if section.figure == "category":
        rounds, new_tokens = generation.rounds, generation.new_tokens
        if rounds is None or new_tokens is None or new_tokens < 2:
            return None
        tpots = [r.decode_s / (new_tokens - 1) for r in rounds]
        if len(tpots) < 2:
            return None
        low, high = mean_ci(tpots)
        return (1.0 / high, 1.0 / low) if low > 0 else None
    samples = section.samples_tokens_per_s
    if samples is None or len(samples) < 2:
        return None
    low, high = mean_ci([float(v) for v in samples])
    return (max(low, 0.0), high) if high > 0 else None
