"""The generation cases of a run (mode ``generate``) as one table: time to first token and per
output token, prefill and decode tokens/s, end-to-end latency, inter-token latency and the bytes a
decode step reads against the measured bandwidth, with the decode bound. Figures that belong
together share a column, one a line (``TTFT`` over ``prefill tok/s``: the header's lines name the
cell's), so that the table holds a case in one row of 80 to 100 columns; ``--wide`` gives every
figure a column of its own and adds the KV cache, the tails, the weights, the tokens and the
rounds. A streamed case (``--stream``: each token read to the host as it is made) says so in its
label: its inter-token latency holds the read, which the device's cadence (timing events on CUDA
and XPU) does not."""

from __future__ import annotations

from accelbench.measure.generation.settle import FIXED_COUNT
from accelbench.measure.trackers.memory import format_bytes
from accelbench.reference.expected_tokens import describe
from accelbench.render.fit import FittedTable
from accelbench.render.format import format_bytes_rate, format_rate, format_seconds, format_tail
from accelbench.render.generation_detail import PROTOCOL_MARK, generation_detail_lines
from accelbench.render.generation_execution import execution_lines, short_bound
from accelbench.render.words import shorten
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import BY_NAME, max_of
from accelbench.results.generation import Generation


def generation_cases(record: RunRecord) -> list[CaseResult]:
    return [case for case in record.cases if case.mode == "generate"]


#: Every figure of a row, in order (``generation_rows``' cells): a column each with ``--wide``.
GENERATION_COLUMNS = ("case", "B/P/N", "TTFT", "prefill tok/s", "TPOT", "decode tok/s", "batch tok/s",
                      "E2E", "output tok/s", "ITL p50/p99", "KV", "read/token", "decode bandwidth",
                      "% bandwidth", "bound")
#: The default table's columns: the figures each holds, one a line (its header's lines name them).
#: The KV cache's size is said by ``--wide`` (the bytes a decode step reads count it).
MERGED_COLUMNS: tuple[tuple[str, ...], ...] = (
    ("case",), ("B/P/N",), ("TTFT", "prefill tok/s"), ("TPOT", "decode tok/s"), ("batch tok/s",),
    ("E2E", "output tok/s"), ("ITL p50/p99",), ("read/token", "decode bandwidth"),
    ("bound", "% bandwidth"))
#: What the default table leaves out where even its narrowest layout is too wide (render/fit.py).
_DROP = ("ITL p50/p99",)
READS_NOTE = ("read/token: the bytes one decode step reads (weights and the cache so far); decode "
              "bandwidth: read/token / TPOT; % bandwidth: of the device's measured bandwidth; bound: "
              "overhead- or bandwidth-bound (said in full below)")
#: An ITL cell with no inter-token latency in it, and why (said under the table where it is used).
NO_DECODE = "—"
NO_DECODE_NOTE = (f"{NO_DECODE}: the case makes one token (a llama-bench pp case times the prompt "
                  "only): no decode step, so no TPOT, decode rate, inter-token latency or decode "
                  "bandwidth")
#: The columns a case without a decode step has nothing in.
DECODE_COLUMNS = ("TPOT", "decode tok/s", "batch tok/s", "ITL p50/p99", "decode bandwidth", "% bandwidth",
                  "bound")
WINDOWS_NOTE = ("ITL windows: the device was timed in synchronised windows of several steps (no "
                "per-token time): the decode rate stands, the per-token latency is not measured")
#: A --protocol case's own figures (results/catalogue.py), each in the column of the quantity it
#: is, with its peer's statistic and marked: the case's rate reads here as on every other surface.
PROTOCOL_CELLS = {"pp_tokens_per_s": "prefill tok/s", "tg_tokens_per_s": "output tok/s",
                  "gpt_fast_tokens_per_s": "output tok/s", "mlperf_ttft_s": "TTFT",
                  "mlperf_token_rate": "decode tok/s"}
#: ``--wide`` gives every figure a column (the KV cache's size among them) and adds the tails
#: MLPerf budgets (TTFT p90/p99 across rounds, TPOT p99: "max of N" where the rounds are too few
#: for the percentile), the memory the weights take, whether the tokens are the fp64 reference's,
#: and the rounds timed with why they stopped.
WIDE_COLUMNS = ("TTFT p90/p99", "TPOT p99", "weights", "tokens", "rounds")


def _label(case: CaseResult) -> str:
    label = f"{case.workload} {case.device} {case.precision}"
    figures = case.generation or Generation()
    # Compiled and eager rows must not look alike: the compile back end and mode, and whether
    # CUDA graphs were captured (the execution recipe, measure/generation/recipe.py).
    if case.compile_backend:
        label += f" compile:{case.compile_backend}"
    if figures.execution is not None and figures.execution.graphs_captured:
        label += " +graphs"
    if figures.streamed:
        label += " streamed"
    protocol = figures.protocol
    if protocol is not None:
        name, test = protocol.name, protocol.test
        label += f" [{name}]" if test == name else f" [{name} {test}]"
    elif case.protocol:
        label += f" [{case.protocol}]"
    return label


def _wide_cells(figures: Generation) -> list[str]:
    p90, p99 = (format_tail(figures, name) for name in ("ttft_p90_s", "ttft_p99_s"))
    # Both the maximum of the same rounds: one figure, said once.
    ttft = p99 if p90 == p99 and max_of(figures, "ttft_p99_s") else f"{p90} / {p99}"
    rounds = figures.rounds or ()
    reason = figures.stop_reason
    return [ttft, format_tail(figures, "tpot_p99_s"),
            format_bytes(figures.weights_memory_bytes) if figures.weights_memory_bytes else "",
            describe(figures.tokens.to_dict() if figures.tokens else None),
            f"{len(rounds)} ({reason})" if reason else str(len(rounds))]


def _request_cells(figures: Generation) -> list[str]:
    """End-to-end latency and output tokens/s (blank in a result written before they were kept)."""
    e2e = figures.e2e_s
    return [format_seconds(e2e), format_rate(figures.output_tokens_per_s)] if e2e else ["", ""]


def _mark_protocol(case: CaseResult, row: list[str]) -> None:
    for name, column in PROTOCOL_CELLS.items():
        figure = BY_NAME[name]
        value = figure.read(case)
        if value is not None:
            shown = format_seconds(value) if figure.unit == "s" else format_rate(value)
            row[GENERATION_COLUMNS.index(column)] = shown + PROTOCOL_MARK


def itl_cell(case: CaseResult) -> str:
    """"351 µs / 679 µs" (p50 / p99); "—" for a case that makes one token (no inter-token gap:
    a llama-bench pp case); "windows" where the steps were timed in windows, not one by one."""
    figures = case.generation or Generation()
    if case.new_tokens <= 1:
        return NO_DECODE
    if figures.itl_p99_s is None:
        return "windows"
    return f"{format_seconds(figures.itl_median_s)} / {format_tail(figures, 'itl_p99_s')}"


def generation_rows(record: RunRecord, wide: bool = False) -> list[list[str]]:
    """Plain-text cells of every figure (``GENERATION_COLUMNS``, and ``WIDE_COLUMNS`` with
    ``wide``), one row per generation case (a failed one: its status and error, the rest blank)."""
    rows = []
    columns = len(GENERATION_COLUMNS) + (len(WIDE_COLUMNS) if wide else 0)
    for case in generation_cases(record):
        label = _label(case)
        shape = f"{case.batch_size}/{case.prompt_len}/{case.new_tokens}"
        figures = case.generation
        if not case.ok or figures is None:
            error = shorten(f"{case.status}: {case.error}", 60)
            rows.append([label, shape, error, *[""] * (columns - 3)])
            continue
        share = figures.bandwidth_share
        flag = "!" if "measurement error" in str(figures.bandwidth_verdict) else ""
        row = [label, shape, format_seconds(figures.ttft_s),
               format_rate(figures.prefill_tokens_per_s), format_seconds(figures.tpot_s),
               format_rate(figures.decode_tokens_per_s) + (" noisy" if figures.noisy else ""),
               format_rate(figures.decode_tokens_per_s_total), *_request_cells(figures),
               itl_cell(case), format_bytes(figures.kv_cache_bytes),
               format_bytes(figures.bytes_per_step),
               format_bytes_rate(figures.effective_bandwidth_bytes_per_s),
               f"{share:.0%}{flag}" if share is not None else "n/a", short_bound(figures)]
        if case.new_tokens <= 1:
            for column in DECODE_COLUMNS:
                row[GENERATION_COLUMNS.index(column)] = NO_DECODE
        _mark_protocol(case, row)
        rows.append(row + (_wide_cells(figures) if wide else []))
    return rows


#: Figures never wrapped (render/fit.py); a default column is whole where all its figures are.
_WHOLE = frozenset({"B/P/N", "TTFT", "prefill tok/s", "TPOT", "decode tok/s", "batch tok/s", "E2E",
                    "output tok/s", "KV", "read/token", "TPOT p99", "weights"})


def _merged(row: list[str]) -> list[str]:
    """A row of every figure as the default table's cells: a column's figures one a line."""
    cells = dict(zip(GENERATION_COLUMNS, row, strict=True))
    return ["\n".join(cells[name] for name in names).rstrip("\n") for names in MERGED_COLUMNS]


def generation_table(record: RunRecord, wide: bool = False) -> FittedTable:
    """Fitted to the terminal: cells wrap between words, nothing is cut. The default table holds
    a case in one row of 80 to 100 columns (``MERGED_COLUMNS``; where even that is too wide, the
    inter-token latency goes first and a line says so); ``wide`` gives every figure a column and
    adds ``WIDE_COLUMNS``, in parts that each repeat the case where they do not fit."""
    rows = generation_rows(record, wide)
    if wide:
        columns = list(GENERATION_COLUMNS + WIDE_COLUMNS)
        whole = [name for name in columns if name in _WHOLE]
    else:
        columns = ["\n".join(names) for names in MERGED_COLUMNS]
        whole = [column for column, names in zip(columns, MERGED_COLUMNS, strict=True)
                 if all(name in _WHOLE for name in names)]
        rows = [_merged(row) for row in rows]
    # A run of generation cases only has no run table above it: this table names the run.
    named = ("" if any(case.mode != "generate" for case in record.cases)
             else f"accelbench run {record.run_id}: ")
    return FittedTable(f"{named}Generation (greedy, KV cache): TPOT and decode tok/s per sequence, "
                       "batch tok/s over the B sequences; E2E = TTFT + decode, output tok/s = B x N / "
                       "E2E", columns, rows, right=columns[1:], whole=whole,
                       drop=() if wide else _DROP, stack=("case",),
                       hint="a wider terminal, --wide or --json shows it")


def generation_notes(record: RunRecord) -> list[str]:
    """How the cases were timed (device events, windows on MPS, host clock), once per method;
    then the protocols' figures, the quantized layers, the tokens and MLPerf's budget."""
    methods = sorted({case.generation.timing_method or "" for case in
                      generation_cases(record) if case.generation})
    lines = [f"generation timed by: {method}" for method in methods if method]
    if any(case.ok and case.generation for case in generation_cases(record)):
        lines.append(READS_NOTE)
    cells = {itl_cell(case) for case in generation_cases(record) if case.ok and case.generation}
    lines += [note for cell, note in ((NO_DECODE, NO_DECODE_NOTE), ("windows", WINDOWS_NOTE))
              if cell in cells]
    return lines + rounds_lines(record) + execution_lines(record) + generation_detail_lines(record)


def rounds_lines(record: RunRecord) -> list[str]:
    """Per stop rule (the result's ``stop_rule``): how many rounds the cases timed and why they
    stopped, so a budget that settled a case and one that ran out read apart."""
    by_rule: dict[str, list[Generation]] = {}
    for case in generation_cases(record):
        if case.ok and case.generation and case.generation.rounds:
            by_rule.setdefault(case.stop_rule, []).append(case.generation)
    lines = []
    for rule, sections in by_rule.items():
        counts = sorted(len(g.rounds or ()) for g in sections)
        timed = f"{counts[0]}" if counts[0] == counts[-1] else f"{counts[0]}-{counts[-1]}"
        # A fixed count's reason ("rounds") says nothing the rule does not.
        reasons = [g.stop_reason or "" for g in sections]
        why = ", ".join(f"{reason} ({reasons.count(reason)})" if len(sections) > 1 else reason
                        for reason in dict.fromkeys(reasons) if reason and reason != FIXED_COUNT)
        lines.append(f"generation rounds: {timed} timed" + (f", stopped by {why}" if why else "")
                     + f" ({rule})")
    return lines
