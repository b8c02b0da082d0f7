"""Export: JSON that load_record reads back, CSV with derived figures, Markdown that stays a table."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from conftest_report import assert_one_line_error, case, cpu_and_cuda, record

from accelbench.cli import main
from accelbench.render.export import CSV_COLUMNS, to_csv, to_json, to_markdown
from accelbench.store.history import HistoryDB
from accelbench.store.jsonfile import load_record


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
    assert float(ok["throughput_samples_per_s"]) > 0 and ok["epoch_time_kind"] == "projected"
    assert int(ok["samples"]) == 30 and ok["machine"] == "host|with|pipes"
    assert failed["status"] == "failed" and failed["throughput_samples_per_s"] == ""
    assert failed["error"].startswith("'=")  # a spreadsheet formula is disarmed
    assert ok["throughput_unit"] == "samples/s"


def test_a_generation_case_exports_tokens_per_second_under_its_own_unit() -> None:
    generating = record("gen1", [case(median=0.1), case(median=0.01, mode="generate")])
    rows = list(csv.DictReader(io.StringIO(to_csv(generating))))
    assert [row["throughput_unit"] for row in rows] == ["samples/s", "decode tokens/s"]
    assert "| samples/s \\| decode tokens/s |" in to_markdown(generating)


def test_markdown_cells_cannot_break_the_table() -> None:
    text = to_markdown(_mixed())
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 4
    assert "host\\|with\\|pipes" in text
    body = table[3]
    assert body.count("|") - body.count("\\|") == 11  # ten cells, no extra column from the error text
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
