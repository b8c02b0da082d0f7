"""Repeats in fresh processes (``--repeat N``): the order they run in, and one result from N.

Each case runs in N separate worker processes. Round r runs every case once before round r+1
starts, so slow drift of the machine (heat, a neighbour's job) spreads over every case instead of
landing on the last one. Each process's samples and figures are kept in ``CaseResult.repeats``;
the per-process figure (``results/process.py``) is the unit that ``compare`` judges.
The top-level fields of the merged result are the pooled view (all samples together); with
``--sustained`` the verdict pools every process's burst and sustained intervals; a ``--protocol``
case's protocol figures are recomputed over every process's repetitions, and each process keeps its
own (``ProcessRun.protocol_rate``), the samples of the rate's interval.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from copy import deepcopy
from dataclasses import replace

import numpy as np

from accelbench.measure.generation.decode_bytes import decode_judgements
from accelbench.measure.generation.protocols import protocol_figures
from accelbench.measure.generation.rounds import GenerationFigures
from accelbench.results import CaseResult, ProcessRun
from accelbench.results.catalogue import case_headline
from accelbench.results.generation import Generation, ProtocolSection
from accelbench.results.sustained import SustainedRecord
from accelbench.workloads.protocols import PER_TOKEN_READ, ProtocolTest


def interleaved(case_count: int, repeat: int) -> Iterator[tuple[int, int]]:
    """(round, case index) in run order: every case once per round."""
    for round_index in range(repeat):
        for case_index in range(case_count):
            yield round_index, case_index


def process_run(result: CaseResult) -> ProcessRun:
    """One process's raw samples and the figures derived from them."""
    times = result.step_times
    return ProcessRun(
        status=result.status, error=result.error, batch_size=result.batch_size,
        step_times=list(times), steps_per_sample=result.steps_per_sample,
        epoch_times=list(result.epoch_times), measured_steps=result.measured_steps,
        measured_time_s=result.measured_time_s, input_wait_s=result.input_wait_s,
        time_to_first_step_s=result.time_to_first_step_s, warmup_time_s=result.warmup_time_s,
        peak_memory_bytes=result.peak_memory_bytes,
        median_step_s=float(np.median(times)) if times else None,
        mean_step_s=float(np.mean(times)) if times else None,
        # A generation case's per-process figure (results/process.py): its TPOT.
        tpot_s=result.generation.tpot_s if result.generation else None,
        # A --protocol case's: its own protocol figure (the catalogue headline it reports).
        protocol_rate=case_headline(result).read(result) if result.protocol and result.ok else None,
        # --sustained: this process's own burst/sustained figures and verdict.
        sustained=result.sustained.figures if result.sustained else None,
    )


def _test_of(section: ProtocolSection, figures: GenerationFigures) -> ProtocolTest:
    """The protocol test a case ran, as its stored section names it."""
    return ProtocolTest(section.test, section.figure, figures.prompt_len, figures.new_tokens,
                        scaled_from=section.scaled_from or "",
                        reads_each_token=section.clock == PER_TOKEN_READ)


def merge_repeats(results: Sequence[CaseResult]) -> CaseResult:
    """One result from the processes of one case: pooled samples, every process kept.

    The case is ok only when every process was; otherwise it carries the first failure's status,
    with the process named in the error, and the processes that finished stay in ``repeats``.
    """
    if len(results) == 1:
        return results[0]
    finished = [r for r in results if r.ok]
    merged = deepcopy(finished[0] if finished else results[0])
    merged.repeats = [process_run(r) for r in results]
    merged.step_times = [t for r in finished for t in r.step_times]
    merged.epoch_times = [t for r in finished for t in r.epoch_times]
    merged.measured_steps = sum(r.measured_steps for r in finished)
    merged.measured_time_s = sum(r.measured_time_s for r in finished)
    merged.input_wait_s = sum(r.input_wait_s for r in finished)
    sustained = [r.sustained for r in finished if r.sustained is not None]
    if len(sustained) > 1 and len(sustained) == len(finished):
        # Every process's burst against every process's sustained part, not the first's alone.
        merged.sustained = SustainedRecord.pooled(sustained)
    generations = [r.generation for r in finished if r.generation and r.generation.rounds]
    if len(generations) > 1:
        # Every process's rounds, so the case's TTFT and TPOT are over all of them.
        first = generations[0]
        figures = [GenerationFigures.from_dict(g.to_dict()) for g in generations]
        pooled = replace(figures[0], rounds=tuple(r for f in figures for r in f.rounds))
        sections = pooled.to_dict()
        reference, effective = first.bandwidth_reference_bytes_per_s, pooled.effective_bandwidth_bytes_per_s
        if reference and reference > 0 and effective and pooled.tpot_s:
            sections.update(decode_judgements(effective, pooled.tpot_s, pooled.bytes_per_step, reference,
                                              first.last_level_cache_bytes, first.host_cpu or ""))
        if first.protocol is not None:
            # The protocol's figure over every process's repetitions, as the peer would report
            # it for all of them (llama-bench -r 10 from two processes of 5); its interval is
            # across the processes' own figures (CaseResult._generation_rate_ci).
            sections["protocol"] = protocol_figures(first.protocol.name, _test_of(first.protocol, pooled),
                                                    pooled)
        merged.generation = Generation.from_dict({**first.to_dict(), **sections}, "generation")
    peaks = [r.peak_memory_bytes for r in finished if r.peak_memory_bytes is not None]
    merged.peak_memory_bytes = max(peaks) if peaks else merged.peak_memory_bytes
    setups = [r.setup_peak_memory_bytes for r in finished if r.setup_peak_memory_bytes is not None]
    merged.setup_peak_memory_bytes = max(setups) if setups else merged.setup_peak_memory_bytes
    failed = next(((i, r) for i, r in enumerate(results) if not r.ok), None)
    if failed is not None:
        index, result = failed
        merged.status = result.status
        merged.error = f"process {index + 1} of {len(results)}: {result.error}"
    return merged
