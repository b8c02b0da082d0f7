"""A prompt-length sweep of generation (``sweep --mode generate --prompt-len LIST``): decode
speed, time to first token and memory against context length, per device, and where memory runs
out; rows shared by the terminal table and the HTML report."""

from __future__ import annotations

from accelbench.measure.trackers.memory import format_bytes
from accelbench.options.recorded import RecordedSweep
from accelbench.render.fit import FittedTable
from accelbench.render.format import format_rate, format_seconds
from accelbench.render.table import memory_cell
from accelbench.render.words import shorten
from accelbench.results import CaseResult, RunRecord
from accelbench.sweeps.analysis import config_words

PROMPT_COLUMNS = ("workload", "device", "config", "batch", "prompt", "TTFT", "prefill tok/s",
                  "decode tok/s", "KV cache", "peak mem")
PROMPT_SWEEP_NOTE = ("decode tok/s: per sequence, greedy with a key/value cache, after the prompt; "
                     "each decode step reads every weight and the cache, so it slows as the "
                     "context grows; TTFT: the prompt's prefill and the first token")

Line = tuple[str, list[tuple[int, float, tuple[float, float] | None]], None]


def is_prompt_sweep(record: RunRecord) -> bool:
    options = record.options
    return (record.kind == "sweep" and isinstance(options, RecordedSweep)
            and options.sweep is not None and options.sweep.axis == "prompt_len")


def _config(case: CaseResult) -> str:
    return f"{config_words(case)} +{case.new_tokens} tokens"


def _curves(record: RunRecord) -> dict[tuple[str, str, str, int], list[CaseResult]]:
    """Cases of one device and configuration, by prompt length."""
    found: dict[tuple[str, str, str, int], list[CaseResult]] = {}
    for case in record.cases:
        found.setdefault((case.workload, case.device, _config(case), case.batch_size), []).append(case)
    for cases in found.values():
        cases.sort(key=lambda c: c.prompt_len)
    return found


def prompt_sweep_rows(record: RunRecord, error_width: int = 60) -> list[list[str]]:
    rows = []
    for (workload, device, config, batch), cases in _curves(record).items():
        for case in cases:
            head = [workload, device, config, str(batch), str(case.prompt_len)]
            figures = case.generation
            if not case.ok or figures is None:
                rows.append([*head, case.status.upper(), shorten(case.error, error_width), "", "", ""])
                continue
            rows.append([*head, format_seconds(figures.ttft_s),
                         format_rate(figures.prefill_tokens_per_s),
                         format_rate(figures.decode_tokens_per_s),
                         format_bytes(figures.kv_cache_bytes or 0), memory_cell(case)])
    return rows


def _decode(case: CaseResult) -> float | None:
    value = case.generation.decode_tokens_per_s if case.ok and case.generation else None
    return value if value is not None and value > 0 else None


def prompt_sweep_lines(record: RunRecord) -> list[str]:
    """Per device: decode speed at the shortest and the longest prompt that ran, and where memory
    ran out."""
    lines = []
    for (workload, device, config, batch), cases in _curves(record).items():
        ran = [c for c in cases if _decode(c)]
        head = f"{workload} generate on {device} ({config}, batch {batch})"
        if not ran:
            lines.append(f"{head}: no prompt length ran")
            continue
        first, last = ran[0], ran[-1]
        text = f"{head}: decode {format_rate(_decode(first))} tok/s at a {first.prompt_len}-token prompt"
        if last is not first:
            change = (_decode(last) or 0) / (_decode(first) or 1) - 1
            text += (f", {format_rate(_decode(last))} at {last.prompt_len} ({change:+.0%}); peak "
                     f"memory {memory_cell(first)} -> {memory_cell(last)}")
        oom = next((c.prompt_len for c in cases if c.status == "oom"), None)
        if oom is not None:
            text += f"; out of memory from a {oom}-token prompt"
        lines.append(text)
    return lines


def prompt_figure_lines(record: RunRecord) -> list[Line]:
    """Per device and configuration: (name, [(prompt, decode tokens/s, None)], None)."""
    return [(f"{workload} {device} ({config}, batch {batch})",
             [(c.prompt_len, rate, None) for c in cases if (rate := _decode(c))], None)
            for (workload, device, config, batch), cases in _curves(record).items()]


def prompt_sweep_table(record: RunRecord) -> FittedTable:
    """For a terminal: one workload's name goes in the title, so the table fits 100 columns."""
    rows = prompt_sweep_rows(record, error_width=30)
    workloads = {row[0] for row in rows}
    single = len(workloads) == 1
    shown = PROMPT_COLUMNS[1:] if single else PROMPT_COLUMNS
    return FittedTable(f"accelbench sweep {record.run_id}: generation against prompt length"
                       + (f", {next(iter(workloads))}" if single else ""), shown,
                       [row[1:] if single else row for row in rows],
                       right=[c for c in shown if c not in ("workload", "device", "config")],
                       whole=("batch", "prompt", "TTFT", "prefill tok/s", "decode tok/s", "KV cache"),
                       stack=("workload", "device", "prompt"))
