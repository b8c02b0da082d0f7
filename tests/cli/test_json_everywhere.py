"""Issue 30 (items B and C): every command that prints figures or verdicts has --json, printing
the stored record with each case's figures by their catalogue names, the same values its table
shows; every command has --quiet; ``share --dry-run`` shows a table of the lines, the lines
themselves behind --json."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest_report import case, record
from conftest_share import EPYC_MODEL, TF32_OFF, environment, result, run, write_peer_bundles
from rich.console import Console

from accelbench.cli import COMMANDS, build_parser
from accelbench.options.recorded import RecordedCheck
from accelbench.render.format import format_rate
from accelbench.results import Parity, ParityTolerance, RunRecord
from accelbench.store.jsonfile import save_record

V1 = Path(__file__).resolve().parents[1] / "data" / "v1"
JSON_COMMANDS = ("run", "sweep", "scale", "history", "compare", "roofline", "check", "probe",
                 "selftest", "list", "doctor")


def _options(argv: list[str]) -> set[str]:
    from accelbench.cli.common import command_parser

    parser = build_parser(argv)
    return set(command_parser(parser, parser.parse_args(argv))._option_string_actions)


@pytest.mark.parametrize("command", JSON_COMMANDS)
def test_every_command_that_prints_figures_has_json(command: str) -> None:
    argv = {"scale": [command, "mnist"], "sweep": [command, "mnist"]}.get(command, [command])
    assert "--json" in _options(argv)


@pytest.mark.parametrize("argv", [[name] for name in COMMANDS if name != "hub"]
                         + [["hub", "compact", "x", "-o", "y"], ["hub", "aggregate", "-o", "y"]])
def test_every_command_has_quiet(argv: list[str]) -> None:
    argv = {"scale": ["scale", "mnist"], "sweep": ["sweep", "mnist"], "import": ["import", "f"],
            "export": ["export", "r"], "site": ["site", "s", "-o", "o"]}.get(argv[0], argv) \
        if argv[0] != "hub" else argv
    assert "--quiet" in _options(argv)


def _table(renderable: Any) -> str:
    console = Console(file=io.StringIO(), width=400, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_run_json_holds_the_figures_the_table_shows(inline_cli, tmp_path: Path) -> None:
    from accelbench.render.table import run_table

    folder = write_peer_bundles(tmp_path / "bundles")
    done = inline_cli("run", "mnist", "--size", "tiny", "--steps", "3", "--warmup", "0", "--mode",
                      "eval", "--device", "cpu", "--isolation", "none", "--quiet", "--json",
                      "--against", str(folder))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # stdout holds the JSON alone
    assert "Saved to" in done.stderr
    (shown,) = data["cases"]
    table = _table(run_table(RunRecord.from_dict(data)))
    assert f"{format_rate(shown['figures']['samples_per_s'])} ±" in table
    assert shown["figures"]["samples_per_s"] == shown["rate"] and shown["rate_unit"] == "samples/s"
    # the table's config column is the configuration's words less the batch (its own column)
    assert shown["config"].rsplit(" batch ", 1)[0] in table and shown["key"]["workload"] == "mnist"
    assert shown["derived"]["throughput_samples_per_s"] == shown["rate"]  # the stored record
    # --against: the case's placement among the shared results beside the record
    (placed,) = data["against"]["placements"]
    assert placed["run"] == data["run_id"]
    assert placed["rate"] == pytest.approx(shown["rate"], rel=1e-5)  # the figure as shared
    assert data["against"]["read"]["lines"] == 33


def _fake(module: str, name: str, made: RunRecord, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's work returns ``made`` (handed to on_case as each case would be)."""
    import importlib

    def work(*args: Any, on_case: Any = None, **kwargs: Any) -> RunRecord:
        if on_case is not None:
            on_case(made)
        return made

    monkeypatch.setattr(importlib.import_module(module), name, work)


def _check_record() -> RunRecord:
    parity = Parity("drift", [1, 2, 3], [1.0] * 3, [1.0] * 3, tolerance=ParityTolerance(1e-2, 5e-2),
                    max_rel_loss_diff=8.52e-3, output_rel_diff=1.3e-4, first_bad_step=2)
    made = record("chk000000001", [case(parity=parity)], kind="check")
    made.options = RecordedCheck(reference="cpu-fp64", check_steps=3)
    return made


@pytest.mark.parametrize(("command", "module", "name", "made"), [
    (["sweep", "mnist", "--batch-size", "1,2", "--device", "cpu"], "accelbench.sweeps.run", "run_sweep",
     record("swp000000001", [case(batch_size=1, median=0.01), case(batch_size=2, median=0.015)],
            kind="sweep")),
    (["check", "mnist", "--device", "cpu"], "accelbench.parity.check", "run_check", _check_record()),
    (["scale", "mnist", "--device", "cpu"], "accelbench.scale.work", "run_scale",
     RunRecord.from_dict(json.loads((V1 / "scale.json").read_text()))),
    (["probe", "--device", "cpu"], "accelbench.probes.work", "probe_record",
     RunRecord.from_dict(json.loads((V1 / "probe.json").read_text()))),
])
def test_the_json_of_a_measuring_command_is_its_record_with_the_tables_values(
        inline_cli, monkeypatch: pytest.MonkeyPatch, command: list[str], module: str, name: str,
        made: RunRecord) -> None:
    from accelbench.render.check_table import check_table
    from accelbench.render.probe_table import probe_table
    from accelbench.render.scale_table import scale_table
    from accelbench.render.sweep_table import sweep_table

    _fake(module, name, made, monkeypatch)
    done = inline_cli(*command, "--json")
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    assert data["run_id"] == made.run_id and data["kind"] == made.kind
    table = _table({"sweep": sweep_table, "check": check_table, "scale": scale_table,
                    "probe": probe_table}[command[0]](made))
    for shown, original in zip(data["cases"], made.cases, strict=True):
        assert shown["figures"]["samples_per_s"] == pytest.approx(original.throughput())
        if command[0] == "sweep":
            assert format_rate(shown["figures"]["samples_per_s"]) in table
        if command[0] == "check":
            assert shown["verdict"] == "drift" and "drift" in table
            assert f"{shown['parity']['max_rel_loss_diff']:.2e}" in table
        if command[0] == "scale":
            assert format_rate(shown["scale"]["global_throughput"]) in table
    for probe in data["probes"]:
        for feature, cell in probe["cells"].items():
            assert feature in table and cell["status"] in table


def test_list_and_doctor_json_hold_what_their_tables_show(inline_cli) -> None:
    listed = inline_cli("list", "mnist", "--json")
    assert listed.returncode == 0, listed.stderr
    (facts,) = json.loads(listed.stdout)
    table = inline_cli("list", "mnist", "--quiet").stdout
    from accelbench.render.list_table import _si

    assert _si(facts["parameters"]) in table and "mnist:" not in table  # --quiet: no notes
    assert "mnist: " in inline_cli("list", "mnist").stdout


def test_quiet_leaves_only_the_result(inline_cli, tmp_path: Path) -> None:
    mine = tmp_path / "mine.json"
    save_record(record("quiet0000001", [case()]), mine)
    db = ["--db", str(tmp_path / "h.sqlite")]
    assert inline_cli("history", *db, "--quiet").stdout == ""  # no "nothing stored" line
    imported = inline_cli("import", str(mine), *db, "--quiet")
    assert imported.returncode == 0 and imported.stdout == "" and imported.stderr == ""
    assert "imported run" in inline_cli("import", str(mine), "--db", str(tmp_path / "g.sqlite")).stdout
    exported = inline_cli("export", "quiet", *db, "-o", str(tmp_path / "e.json"), "--quiet")
    assert exported.returncode == 0 and exported.stderr == "" and (tmp_path / "e.json").exists()
    assert "written to" in inline_cli("export", "quiet", *db, "-o", str(tmp_path / "f.json")).stderr
    reported = inline_cli("report", str(mine), "-o", str(tmp_path / "r.html"), "--quiet")
    assert reported.returncode == 0 and reported.stderr == ""


def test_share_dry_run_shows_a_table_of_the_lines_and_json_the_lines(inline_cli, tmp_path: Path) -> None:
    save_record(run("dry00000001", [result(EPYC_MODEL, 900.0, device="cpu")], environment("cpu", EPYC_MODEL)),
                tmp_path / "r.json")
    lines = inline_cli("share", str(tmp_path / "r.json"), "--dry-run", "--json")
    assert lines.returncode == 0, lines.stderr
    (line,) = [json.loads(text) for text in lines.stdout.splitlines()]
    shown = inline_cli("share", str(tmp_path / "r.json"), "--dry-run")
    assert shown.returncode == 0 and "nothing written" in shown.stderr
    text = " ".join(shown.stdout.split())
    # no id is stored yet: each dry run shows the new one it would draw, the same in both places
    identity = shown.stderr.split(" as machine ")[1].split()[0]
    assert "would be shared: 1 line(s)" in text and f"as machine {identity}" in text
    assert f"{format_rate(line['figures']['samples_per_s'])} samples/s" in text
    assert "mnist train" in text and line["device"]["model"] in text
    assert "--dry-run --json" in text  # where the lines themselves are
    quiet = inline_cli("share", str(tmp_path / "r.json"), "--dry-run", "--quiet")
    assert quiet.stderr == "" and "would be shared: 1 line(s)" in quiet.stdout
    refused = inline_cli("share", str(tmp_path / "r.json"), "--json")
    assert refused.returncode == 2 and "add --dry-run" in refused.stderr


def test_compare_against_json_holds_the_peers_tables_figures(inline_cli, tmp_path: Path) -> None:
    """``compare --against`` prints verdicts, so it has --json too: each case's placement (the
    user's rate, percentile, ratio, verdict and reasons, every device model's group) and every line
    of the sources accounted for; the values the peers table shows."""
    h100 = "NVIDIA H100 80GB HBM3"
    folder = write_peer_bundles(tmp_path / "bundles")
    mine = tmp_path / "mine.json"
    save_record(run("me0000000001", [result(h100, 5200.0, flags=TF32_OFF)],
                    environment("cuda:0", h100, hostname="mine")), mine)
    table = inline_cli("compare", str(mine), "--against", str(folder))
    done = inline_cli("compare", str(mine), "--against", str(folder), "--json")
    assert table.returncode == 0 and done.returncode == 0, table.stderr + done.stderr
    data = json.loads(done.stdout)
    assert "comparisons" not in data  # one run placed: its table shows only its peers
    (placed,) = data["against"]["placements"]
    assert placed["verdict"] == "below its peers" and "below" in table.stdout
    assert placed["device_model"] == h100
    assert any("TF32" in reason for reason in placed["reasons"])
    shown = table.stdout
    assert format_rate(placed["rate"]) in shown and f"{placed['ratio_to_median']:.2f}x" in shown
    own = placed["own_model"]
    assert own["device_model"] == h100 and format_rate(own["median"]) in shown
    assert placed["peers"] == sum(model["count"] for model in placed["models"])
    read = data["against"]["read"]
    assert read["lines"] == 33 and read["summary"].startswith("read 33 shared result(s)")
    assert read["summary"] in " ".join(table.stdout.split())
    # two runs: the comparison of runs the table shows, and the placement
    two = inline_cli("compare", str(mine), str(mine), "--against", str(folder), "--json")
    assert {"against", "comparisons"} <= set(json.loads(two.stdout))
