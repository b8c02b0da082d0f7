"""Lines under the generation table: each case's figures as its ``--protocol`` defines them
(llama-bench's mean +- sd, gpt-fast's tokens/s and bandwidth achieved, MLPerf Client's per
category and overall), how a quantized case's weights were packed and what they hold, whether the
tokens are the fp64 reference's, and MLPerf Inference's interactive budget where a
Llama-3.1-8B-shaped model ran. Pure: every number is a stored figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.measure.trackers.memory import format_bytes
from accelbench.reference.expected_tokens import describe
from accelbench.render.format import format_bytes_rate, format_rate, format_seconds
from accelbench.render.generation_execution import case_who
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import ACROSS_CASES, BY_NAME, tail_label
from accelbench.results.generation import ProtocolSection, Quantization
from accelbench.results.protocol_overall import Overall
from accelbench.results.protocol_summary import stored_overall

#: Marks a table cell that holds a --protocol figure (the generation table's PROTOCOL_CELLS).
PROTOCOL_MARK = "*"
#: Said once under a table that holds a quantized case: how to read its bandwidth share.
QUANTIZED_READING = ("a quantized row reads its weights packed (int8: 1 byte a weight, int4: half "
                     "a byte, with their scales and zero points), so its bytes per token are the "
                     "packed ones; the kernels unpack as they go, so 50-70% of the measured "
                     "bandwidth is a healthy int4 decode on a GPU, not a fault. Its speed goes with "
                     "what it cost: check --mode generate --precision int4-wo")


def _plus_minus(section: ProtocolSection) -> str:
    sd = section.tokens_per_s_sd
    spread = f" ± {format_rate(sd)}" if sd is not None else ""
    return f"{format_rate(section.tokens_per_s)}{spread} tokens/s"


def _protocol_line(case: CaseResult, section: ProtocolSection) -> str:
    figure, label = section.figure, section.label or section.test
    who = f"  {case_who(case)} {label}"
    # The clock the peer's figures were read by (a result written before it was kept: unsaid).
    clock = f"; {section.clock}" if section.clock else ""
    if figure in ("pp", "tg"):
        return f"{who}: {_plus_minus(section)} (mean ± sd over {section.rounds} repetitions{clock})"
    if figure == "decode":
        share = _figure(case, "gpt_fast_bandwidth_share")
        return (f"{who}: {format_rate(section.tokens_per_s)} tokens/s, bandwidth achieved "
                f"{format_bytes_rate(section.bandwidth_bytes_per_s)}"
                + (f" ({share:.0%} of measured)" if share is not None else "")
                + f" (mean over {section.rounds} samples{clock})")
    return (f"{who}: TTFT {format_seconds(section.ttft_mean_s)}, 2nd+ token rate "
            f"{format_rate(section.token_rate)} tokens/s (mean over {section.rounds} "
            f"iterations{clock})")


def _figure(case: CaseResult, name: str) -> Any:
    return BY_NAME[name].read(case)


def _overall_who(overall: Overall) -> str:
    """Workload, device, then precision (and compile), as every case is named: "llama-1b cpu int4-wo"."""
    workload, _, rest = overall.label.partition(" ")
    return " ".join(part for part in (workload, overall.device, rest) if part)


#: The columns of the overall figures' table (compare, export): each figure by its catalogue label.
OVERALL_COLUMNS = ("run", "case", "categories", *(f.label for f in ACROSS_CASES))


def overall_rows(runs: Sequence[tuple[str, RunRecord]]) -> list[list[str]]:
    """A row per run and group of its stored overall figures (results/protocol_overall.py), in
    the words the run's lines under its table use; empty where no run has any."""
    return overall_group_rows([(label, group) for label, record in runs for group in stored_overall(record)])


def overall_group_rows(groups: Sequence[tuple[str, Overall]]) -> list[list[str]]:
    """A row per (run label, stored overall group): what ``overall_rows`` shows of a record, for
    groups read without their record (the history's ``protocol_overall`` table)."""
    rows = []
    for label, overall in groups:
        complete = not overall.missing
        rows.append([label, _overall_who(overall),
                     str(len(overall.categories)) if complete
                     else f"missing: {', '.join(overall.missing)}",
                     format_seconds(overall.ttft_s) if complete and overall.ttft_s else "n/a",
                     f"{format_rate(overall.token_rate)} tokens/s" if complete and overall.token_rate
                     else "n/a"])
    return rows


def protocol_lines(record: RunRecord) -> list[str]:
    cases = [c for c in record.cases if c.mode == "generate" and c.ok and c.generation]
    by_protocol: dict[str, list[str]] = {}
    for case in cases:
        section = case.generation.protocol if case.generation else None
        if section is not None:
            by_protocol.setdefault(section.name, []).append(_protocol_line(case, section))
    lines = []
    for name, rows in by_protocol.items():
        lines += [f"--protocol {name}, as the peer reports it ({PROTOCOL_MARK} in the table: the case's "
                  "rate, and the figures its peer defines):", *rows]
    for overall in stored_overall(record):
        who = _overall_who(overall)
        if overall.missing:
            lines.append(f"  {who} overall: none (categories missing: {', '.join(overall.missing)})")
        else:
            lines.append(f"  {who} overall (geometric mean of "
                         f"{len(overall.categories)} categories): TTFT "
                         f"{format_seconds(overall.ttft_s)}, 2nd+ token rate "
                         f"{format_rate(overall.token_rate)} tokens/s")
    return lines


def _quantization_line(case: CaseResult, section: Quantization) -> str:
    group = section.group_size
    smaller = sorted(set(section.smaller_groups.values()))
    grouping = f", groups of {group}" if group else ""
    if smaller:
        grouping += f" ({'/'.join(map(str, smaller))} where a layer has fewer inputs)"
    kept = section.kept
    kept_text = f"; kept in bf16: {', '.join(f'{k} ({v})' for k, v in kept.items())}" if kept else ""
    return (f"  {case_who(case)}: {section.quantized_layers} linear layers packed for "
            f"{section.kernel}{grouping}; the weights hold "
            f"{format_bytes(section.weight_bytes)} (unquantized "
            f"{format_bytes(section.unquantized_bytes)}){kept_text}")


def generation_detail_lines(record: RunRecord) -> list[str]:
    cases = [c for c in record.cases if c.mode == "generate" and c.ok and c.generation]
    lines = protocol_lines(record)
    quantized = [(c, c.generation.quantization) for c in cases
                 if c.generation and c.generation.quantization is not None]
    if quantized:
        lines.append("weight-only quantization:")
        lines += list(dict.fromkeys(_quantization_line(case, section) for case, section in quantized))
        lines.append(f"  reading: {QUANTIZED_READING}")
    tokens = [f"{case_who(c)} {c.prompt_len}+{c.new_tokens}: "
              f"{describe(c.generation.tokens.to_dict(), full=True)}"
              for c in cases if c.generation and c.generation.tokens]
    if tokens:
        lines.append("greedy tokens against the fp64 CPU reference's (shipped hashes): "
                     + "; ".join(tokens))
    for case in cases:
        budget = case.generation.mlperf_interactive if case.generation else None
        if budget is not None:
            verdict = "meets" if budget.meets else "misses"
            lines.append(f"{case_who(case)}: {verdict} MLPerf Inference's interactive budget for "
                         f"{budget.shape} ({tail_label(case.generation, 'ttft_p99_s')} "
                         f"{format_seconds(budget.ttft_p99_s)} of 500 ms, "
                         f"{tail_label(case.generation, 'tpot_p99_s')} "
                         f"{format_seconds(budget.tpot_p99_s)} of 30 ms, "
                         f"over {budget.rounds} rounds)")
    return lines


def quality_lines(record: RunRecord) -> list[str]:
    """``check --mode generate`` of a quantized precision: what the quantization cost, in full
    (the verdict's table cell has room for its start only)."""
    from accelbench.parity.quantized import describe_quality

    lines = []
    for case in record.cases:
        parity = case.generation.parity if case.generation else None
        quality = parity.quality if parity is not None else None
        if quality is not None:
            lines.append(f"{case_who(case)} prompt {case.prompt_len} +{case.new_tokens}: "
                         f"{describe_quality(quality)}")
    return lines
