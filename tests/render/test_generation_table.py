"""The generation table holds a case in one row of 80 to 100 columns: it was split into three
parts at 100 (fourteen figure columns), now figures that belong together share a column, one a
line (TTFT over prefill tok/s, TPOT over decode tok/s, E2E over output tok/s, read/token over
decode bandwidth, the bound over % bandwidth); ``--wide`` gives every figure a column of its own
and the KV cache's size; ``--json`` keeps them all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import rendered_text

from accelbench.render.format import format_rate, format_seconds
from accelbench.render.generation_table import (
    GENERATION_COLUMNS,
    WIDE_COLUMNS,
    generation_rows,
    generation_table,
)
from accelbench.render.json_views import record_view
from accelbench.results import CaseResult, RunRecord
from accelbench.results.generation import Generation

H100 = Path(__file__).parents[1] / "data" / "decode_bound" / "h100-llama-1b-gpt-fast.json"


def _cpu_run() -> RunRecord:
    """The quick suite's generation row on the 2-core development VM (README's figures): a long
    workload name, a noisy decode rate and an ITL tail that is the maximum of its rounds."""
    generation = Generation(
        batch_size=1, prompt_len=128, new_tokens=128, ttft_s=3.43, prefill_tokens_per_s=37.3,
        tpot_s=0.3049, decode_tokens_per_s=3.28, decode_tokens_per_s_total=3.28, e2e_s=42.19,
        output_tokens_per_s=3.03, itl_median_s=0.3283, itl_p99_s=0.6582,
        tail_statistics={"itl_p99_s": "max of 75"}, kv_cache_bytes=4_718_592,
        bytes_per_step=46_137_344, effective_bandwidth_bytes_per_s=151e6, bandwidth_share=0.05,
        decode_bound="overhead", noisy=True)
    case = CaseResult(workload="nanogpt-char", mode="generate", device="cpu", batch_size=1,
                      prompt_len=128, new_tokens=128, generation=generation)
    return RunRecord("gen1", "2026-11-27T00:00:00+00:00", "0.1.0", cases=[case])


def _parts(text: str) -> int:
    """How many tables ``text`` holds: each has one rule under its header."""
    return sum(1 for line in text.splitlines() if line.startswith("─"))


def _key_figures(case: CaseResult) -> list[str]:
    figures = case.generation
    assert figures is not None
    return [format_seconds(figures.ttft_s), format_seconds(figures.tpot_s),
            format_rate(figures.decode_tokens_per_s), format_rate(figures.decode_tokens_per_s_total),
            {"overhead": "overhead", "bandwidth": "bw-bound"}[figures.decode_bound or ""]]


@pytest.mark.parametrize("width", [100, 80])
def test_a_generation_row_is_one_table_at_100_and_80_columns(width: int) -> None:
    record = _cpu_run()
    text = rendered_text(generation_table(record), width)
    assert _parts(text) == 1, text
    assert max(len(line) for line in text.splitlines()) <= width and "…" not in text
    for header in ("TTFT", "TPOT", "decode", "bound", "read/token"):
        assert header in text, header
    for figure in _key_figures(record.cases[0]):
        assert figure in text, figure
    assert "noisy" in text and "42.19 s" in text and "151 MB/s" in text and "5%" in text
    if width == 100:  # everything but the KV cache's size (--wide)
        assert "328.3 ms" in text and "left out" not in text
    else:  # the inter-token latency goes first, and a line says so
        assert "328.3 ms" in text or "left out to fit 80 columns: ITL p50/p99" in text


def test_compiled_protocol_rows_of_a_real_h100_run_are_one_table_at_100_columns() -> None:
    """Labels as long as they come (compile:inductor:reduce-overhead +graphs [gpt-fast]), a
    protocol's marked figure, both bounds."""
    record = RunRecord.from_dict(json.loads(H100.read_text()))
    text = rendered_text(generation_table(record), 100)
    assert _parts(text) == 1, text
    assert max(len(line) for line in text.splitlines()) <= 100 and "…" not in text
    for case in record.cases:
        for figure in _key_figures(case):
            assert figure in text, figure
    assert "*" in text  # gpt-fast's own rate, in the column of its quantity


def test_wide_gives_every_figure_a_column_and_json_keeps_them() -> None:
    record = _cpu_run()
    (row,) = generation_rows(record, wide=True)
    cells = dict(zip(GENERATION_COLUMNS + WIDE_COLUMNS, row, strict=True))
    assert (cells["TPOT"], cells["KV"], cells["decode tok/s"]) == ("304.9 ms", "4.5 MiB", "3.28 noisy")
    wide = rendered_text(generation_table(record, wide=True))
    default = rendered_text(generation_table(record))
    for column in (name for name in GENERATION_COLUMNS + WIDE_COLUMNS if cells[name]):
        assert column in wide, column  # a column no case has a figure in is left out
    assert "4.5 MiB" in wide and "4.5 MiB" not in default  # the KV cache: --wide's
    (view,) = record_view(record)["cases"]
    assert view["generation"]["kv_cache_bytes"] == 4_718_592 and view["generation"]["tpot_s"] == 0.3049


def test_a_failed_case_keeps_its_row_with_its_error() -> None:
    failed = CaseResult(workload="gpt2", mode="generate", device="cpu", batch_size=1, prompt_len=8,
                        new_tokens=8, status="oom", error="out of memory")
    record = _cpu_run()
    record.cases.append(failed)
    text = rendered_text(generation_table(record), 100)
    assert "oom: out of memory" in text and _parts(text) == 1
