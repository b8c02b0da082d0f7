"""Rows for report sections drawn from run records: environments once per machine, the diagnosis
of profiled cases, and each case's peak memory with its source. Plain strings only: the report's
template (``templates/report.html.j2``) shows them as escaped text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.compare import LabelledRun
from accelbench.measure.trackers.memory import format_bytes
from accelbench.render.diagnosis import diagnose
from accelbench.render.table import config_label, memory_cell, memory_tag


def machine_facts(run: LabelledRun) -> list[tuple[str, str]]:
    """The facts of the machine and software a run ran on (not of the run itself)."""
    env = run.record.environment

    def get(section: str, key: str) -> str:
        value = env.get(section)
        return str(value.get(key, "n/a")) if isinstance(value, dict) else "n/a"

    found = env.get("devices")
    devices_info: dict[str, Any] = found if isinstance(found, dict) else {}
    found = devices_info.get("cpu")
    cpu: dict[str, Any] = found if isinstance(found, dict) else {}
    devices = ", ".join(f"{name}: {info.get('name', '')}" if isinstance(info, dict) else str(name)
                        for name, info in devices_info.items())
    return [("system", get("machine", "platform")),
            ("CPU", f"{cpu.get('name', 'n/a')} ({cpu.get('physical_cores', '?')} cores)"),
            ("memory", format_bytes(run.memory_bytes) if run.memory_bytes else "n/a"),
            ("Python", get("python", "version")), ("torch", get("torch", "version")),
            ("accelbench", run.record.accelbench_version), ("devices", devices or "n/a")]


def environments_by_machine(runs: Sequence[LabelledRun]) -> dict[str, list[tuple[str, str]]]:
    """Facts per machine, each once; a fact that changed between runs on one machine (a torch
    upgrade) lists each value with the runs that had it."""
    machines: dict[str, list[LabelledRun]] = {}
    for run in runs:
        machines.setdefault(run.machine or "unknown machine", []).append(run)
    out: dict[str, list[tuple[str, str]]] = {}
    for machine, machine_runs in machines.items():
        per_run = [dict(machine_facts(run)) for run in machine_runs]
        rows = []
        for fact in per_run[0]:
            values: dict[str, list[str]] = {}
            for run, facts in zip(machine_runs, per_run, strict=True):
                values.setdefault(facts.get(fact, "n/a"), []).append(run.label)
            if len(values) == 1:
                rows.append((fact, next(iter(values))))
            else:
                rows.append((fact, "; ".join(f"{value} (runs {', '.join(labels)})"
                                             for value, labels in values.items())))
        out[machine] = rows
    return out


def run_rows(runs: Sequence[LabelledRun]) -> list[tuple[str, str, str, str, str]]:
    """One line per run: what it was, when, where, and the command."""
    return [(run.label, run.record.kind, run.record.created_at, run.machine or "unknown machine",
             " ".join(map(str, run.record.command)) or "n/a") for run in runs]


DIAGNOSIS_COLUMNS = ("run", "workload", "mode", "device", "diagnosis", "figures", "top ops per step")


def diagnosis_rows(runs: Sequence[LabelledRun]) -> list[tuple[str, ...]]:
    """A row per profiled case: the diagnosis word, the figures behind it and the top ops."""
    rows: list[tuple[str, ...]] = []
    for run in runs:
        for case in run.record.cases:
            if case.profile is None:
                continue
            diagnosis = diagnose(case)
            word, line, top = ((diagnosis.word, diagnosis.line, diagnosis.top_ops_text(3)) if diagnosis
                               else ("not profiled", case.profile.error or "no figures", ""))
            rows.append((run.label, case.workload, case.mode, case.device, word, line, top))
    return rows


MEMORY_COLUMNS = ("run", "workload", "mode", "device", "config", "batch", "peak memory", "source",
                  "measured as")


def memory_rows(runs: Sequence[LabelledRun]) -> list[tuple[str, ...]]:
    """A row per case with a peak-memory figure: the figure with its short source tag (RSS,
    allocator, sampled), the tag again as its own column, and the source in full words, so a
    process's resident set is never read as an accelerator's live tensors."""
    return [(run.label, case.workload, case.mode, case.device, config_label(case), str(case.batch_size),
             memory_cell(case), memory_tag(case) or "n/a", case.memory_source or "not recorded")
            for run in runs for case in run.record.cases if case.peak_memory_bytes is not None]


GENERATION_COLUMNS = ("run", "workload", "device", "precision", "B", "prompt", "new", "TTFT",
                      "prefill tok/s", "decode tok/s", "total tok/s", "ITL p50 / p99", "KV cache",
                      "read / token", "of measured bandwidth")


def generation_rows(runs: Sequence[LabelledRun]) -> list[tuple[str, ...]]:
    """A row per measured generation case, ordered so that decode speed reads down against the
    prompt (context) length for each workload, device and precision."""
    from accelbench.measure.trackers.memory import format_bytes
    from accelbench.render.format import format_rate, format_seconds, format_tail

    found = [(run, case) for run in runs for case in run.record.cases
             if case.mode == "generate" and case.ok and case.generation]
    found.sort(key=lambda item: (item[1].workload, item[1].device, item[1].precision,
                                 item[1].batch_size, item[1].new_tokens, item[1].prompt_len))
    rows: list[tuple[str, ...]] = []
    for run, case in found:
        g = case.generation
        assert g is not None  # found holds generation cases only
        itl = (f"{format_seconds(g.itl_median_s)} / {format_tail(g, 'itl_p99_s')}"
               if g.itl_p99_s is not None else "windows (no per-token times)")
        share = g.bandwidth_share
        rows.append((run.label, case.workload, case.device, case.precision, str(case.batch_size),
                     str(case.prompt_len), str(case.new_tokens), format_seconds(g.ttft_s),
                     format_rate(g.prefill_tokens_per_s), format_rate(g.decode_tokens_per_s),
                     format_rate(g.decode_tokens_per_s_total), itl,
                     format_bytes(g.kv_cache_bytes), format_bytes(g.bytes_per_step),
                     f"{share:.0%}" if share is not None else g.bandwidth_verdict or "n/a"))
    return rows
