"""Export: JSON that load_record reads back, CSV with derived figures, Markdown that stays a table."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from conftest_report import assert_one_line_error, case, cpu_and_cuda, record

from accelbench.cli import main
from accelbench.render.export import CSV_COLUMNS, to_csv, to_json, to_markdown
from accelbench.results.generation import Generation
from accelbench.store.history import HistoryDB
from accelbench.store.jsonfile import load_record, save_record


def _mixed():
    return record("mix1", [case(median=0.1), case(device="cuda:0", status="failed", step_times=[],
                                                   error="=cmd|' /C calc'!A0\nsecond line")],
                  machine="host|with|pipes")


def test_json_export_reloads_losslessly(tmp_path: Path) -> None:
    original = cpu_and_cuda("json1")
    (tmp_path / "out.json").write_text(to_json(original))
    assert load_record(tmp_path / "out.json").to_dict() == original.to_dict()


def test_csv_has_one_row_per_case_with_derived_figures() -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(_mixed()))))
    assert len(rows) == 2 and tuple(rows[0]) == CSV_COLUMNS
    ok, failed = rows
    assert float(ok["rate"]) > 0 and ok["epoch_time_kind"] == "projected"
    assert float(ok["samples_per_s"]) == float(ok["rate"]) and ok["rate_name"] == "samples_per_s"
    assert int(ok["samples"]) == 30 and ok["machine"] == "host|with|pipes"
    assert failed["status"] == "failed" and failed["rate"] == ""
    assert failed["error"].startswith("'=")  # a spreadsheet formula is disarmed
    assert ok["rate_unit"] == "samples/s"


def _generating(tmp_path: Path):
    """A stored run of a training case, a generation case and a llama-bench pp case, as the
    engine writes them (the generation figures its section keeps), read back from its file."""
    generation = {"decode_tokens_per_s_total": 24.0, "ttft_s": 0.0721, "tpot_s": 0.0417,
                  "itl_median_s": 0.0415, "e2e_s": 1.4, "execution": {
                      "kv_cache": "static", "prefill": "eager", "decode": "compiled",
                      "compile": "inductor:max-autotune", "cuda_graphs": "not asked"}}
    pp = {"ttft_s": 0.05, "protocol": {"name": "llama-bench", "test": "pp63", "figure": "pp",
                                       "tokens_per_s": 1000.0, "tokens_per_s_sd": 5.0}}
    cases = [case(median=0.1),
             case(workload="gpt2", mode="generate", median=0.0415, dataset_size=0, prompt_len=32,
                  new_tokens=64, compile_backend="inductor:max-autotune",
                  generation=Generation.from_dict(generation)),
             case(workload="gpt2", mode="generate", median=0.05, dataset_size=0, prompt_len=63,
                  new_tokens=1, protocol="llama-bench", generation=Generation.from_dict(pp))]
    return load_record(save_record(record("gen1", cases), tmp_path / "gen1.json"))


def test_a_generation_case_exports_under_the_catalogue_s_names(tmp_path: Path) -> None:
    """Issue 36: decode tokens/s was exported under throughput_samples_per_s and the ITL under
    "median step", without the case's lengths, protocol or execution; each kind of work's
    columns are now the catalogue's."""
    generating = _generating(tmp_path)
    train, decode, pp = list(csv.DictReader(io.StringIO(to_csv(generating))))
    assert "throughput_samples_per_s" not in CSV_COLUMNS
    assert (train["rate_name"], train["rate_unit"]) == ("samples_per_s", "samples/s")
    assert (decode["rate_name"], decode["rate_unit"]) == ("decode_tokens_per_s_total", "decode tokens/s")
    assert float(decode["rate"]) == float(decode["decode_tokens_per_s_total"]) == 24.0
    assert decode["samples_per_s"] == "" and decode["median_step_s"] == "" and decode["samples"] == ""
    assert float(decode["itl_p50_s"]) == 0.0415 and float(decode["tpot_s"]) == 0.0417
    assert (decode["prompt_len"], decode["new_tokens"], decode["protocol"]) == ("32", "64", "")
    assert decode["compile_backend"] == "inductor:max-autotune"
    assert "decode compiled (inductor:max-autotune)" in decode["execution"]
    assert (pp["protocol"], pp["rate_name"], float(pp["rate"])) == ("llama-bench", "pp_tokens_per_s", 1000.0)
    assert train["prompt_len"] == "" and train["compile_backend"] == "none"
    markdown = to_markdown(generating)
    assert "## Training and evaluation" in markdown and "## Generation" in markdown
    step_header, generation_header = (line for line in markdown.splitlines() if line.startswith("| workload"))
    assert "samples/s" in step_header and "decode" not in step_header
    for label in ("prompt_len", "new_tokens", "protocol", "execution", "TTFT (s)", "TPOT (s)", "ITL p50 (s)"):
        assert label in generation_header
    assert "median step" not in generation_header and "samples/s" not in generation_header
    assert "24.0 decode tokens/s" in markdown and "1,000.0 pp tokens/s (llama-bench)" in markdown


def test_markdown_cells_cannot_break_the_table() -> None:
    text = to_markdown(_mixed())
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 4
    assert "host\\|with\\|pipes" in text
    body = table[3]
    assert body.count("|") - body.count("\\|") == 12  # eleven cells, no extra column from the error text
    assert "second line" not in text  # only the first line of an error goes into a cell


def test_export_command(capsys, tmp_path: Path) -> None:
    with HistoryDB() as db:
        db.add_record(cpu_and_cuda("export123"))
    assert main(["export", "export1", "--format", "markdown"]) == 0
    assert "# accelbench run export123" in capsys.readouterr().out
    target = tmp_path / "out.json"
    assert main(["export", "exp", "--format", "json", "-o", str(target)]) == 0
    assert load_record(target).run_id == "export123"


def test_export_cli_unknown_run(cli) -> None:
    with HistoryDB() as db:
        db.add_record(cpu_and_cuda("export123"))
    result = cli("export", "nothere", "--format", "csv")
    assert_one_line_error(result, "no stored run", "nothere")
    assert result.stdout == ""
