"""Issue 29, export where dashboards live: ``export --format hud`` writes one record per metric in
the PyTorch OSS benchmark database's schema v3 (pytorch/test-infra's ``oss_ci_benchmark_v3``
table, which hud.pytorch.org reads and vLLM uploads to). The schema check below is that table's
tuple fields and types; the export is written by the real CLI, loaded and validated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest_share import EPYC_MODEL, H100_MODEL, environment, result, run

from accelbench.results.catalogue import case_figures, headline
from accelbench.store.history import HistoryDB

#: Field -> type of the v3 table's tuples (String -> str, UInt32 -> int, Float32 -> float,
#: Map(String, String) -> dict of str, Array(T) -> list).
MAP = "map"
SCHEMA: dict[str, dict[str, Any]] = {
    "benchmark": {"name": str, "mode": str, "dtype": str, "extra_info": MAP},
    "model": {"name": str, "type": str, "backend": str, "origins": [str], "extra_info": MAP},
    "metric": {"name": str, "benchmark_values": [float], "target_value": float, "extra_info": MAP},
    "runner": {"name": str, "type": str, "cpu_info": str, "cpu_count": int, "mem_info": str,
               "avail_mem_in_gb": int, "gpu_info": str, "gpu_count": int, "gpu_mem_info": str,
               "avail_gpu_mem_in_gb": int, "extra_info": MAP},
    "dependency": {"repo": str, "branch": str, "sha": str, "version": str, "extra_info": MAP},
}
#: Required (the wiki's "Required"): benchmark.name, model.name, metric.name and its values.
REQUIRED = {"benchmark": ("name",), "model": ("name",), "metric": ("name", "benchmark_values")}
#: Left out where there is nothing to say (vLLM's uploads leave target_value out): a 0 would read
#: as a target of zero.
OPTIONAL = {"metric": ("target_value",)}


def _check(value: Any, kind: Any, where: str) -> None:
    if kind == MAP:
        assert isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in value.items()), where
    elif isinstance(kind, list):
        assert isinstance(value, list) and all(isinstance(v, kind[0]) for v in value), where
    elif kind is float:
        assert isinstance(value, int | float) and not isinstance(value, bool), where
    else:
        assert isinstance(value, kind) and not isinstance(value, bool), where
    if kind is int:
        assert 0 <= value < 2**32, where  # UInt32


def validate(row: dict[str, Any]) -> None:
    for section in ("benchmark", "model", "metric"):
        optional = set(OPTIONAL.get(section, ()))
        assert set(SCHEMA[section]) - optional <= set(row[section]) <= set(SCHEMA[section]), section
        for name, kind in SCHEMA[section].items():
            if name in row[section]:
                _check(row[section][name], kind, f"{section}.{name}")
        for name in REQUIRED[section]:
            assert row[section][name], f"{section}.{name} is required"
    assert isinstance(row["runners"], list) and row["runners"]
    for runner in row["runners"]:
        assert set(runner) == set(SCHEMA["runner"])
        for name, kind in SCHEMA["runner"].items():
            _check(runner[name], kind, f"runners.{name}")
    assert isinstance(row["dependencies"], dict)
    for dependency in row["dependencies"].values():
        assert set(dependency) == set(SCHEMA["dependency"])
        for name, kind in SCHEMA["dependency"].items():
            _check(dependency[name], kind, f"dependencies.{name}")


def test_hud_export_round_trips_through_the_schema(tmp_path: Path, inline_cli) -> None:
    """Issue 29 (export): written, loaded, every record valid; one record per figure of each
    finished case (the catalogue's names and values); a failed case has none; the published
    mnist figure is the real-data case's target."""
    ok = result(H100_MODEL, 40000.0, device="cuda:0")
    real = result(EPYC_MODEL, 1500.0, device="cpu", data="real")
    failed = result(EPYC_MODEL, 900.0, device="cpu", status="failed", step_times=[], error="boom")
    record = run("hud00001", [ok, real, failed], environment("cuda:0", H100_MODEL))
    with HistoryDB(tmp_path / "h.sqlite") as db:
        db.add_record(record)
    out = tmp_path / "hud.json"
    done = inline_cli("export", "hud00001", "--format", "hud", "-o", str(out),
                      "--db", str(tmp_path / "h.sqlite"))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    for row in rows:
        validate(row)
    for case in (ok, real):
        expected = {name: value for name, value in case_figures(case).items()
                    if isinstance(value, int | float) and not isinstance(value, bool)}
        mine = {r["metric"]["name"]: r for r in rows if r["benchmark"]["extra_info"]["device"] == case.device}
        assert set(mine) == set(expected)
        for name, value in expected.items():
            assert mine[name]["metric"]["benchmark_values"] == [float(f"{value:.6g}")]
    gpu = next(r for r in rows
               if r["metric"]["name"] == headline("train").name and r["runners"][0]["name"] == "cuda")
    assert gpu["benchmark"]["mode"] == "training" and gpu["benchmark"]["dtype"] == "fp32"
    assert gpu["runners"][0]["gpu_info"] == H100_MODEL and gpu["runners"][0]["avail_gpu_mem_in_gb"] == 80
    assert gpu["dependencies"]["torch"]["version"] == "2.6.0" and gpu["model"]["name"] == "mnist"
    assert gpu["metric"]["extra_info"]["unit"] == "samples/s" and "target_value" not in gpu["metric"]
    target = next(r for r in rows
                  if r["metric"]["name"] == "samples_per_s" and r["runners"][0]["name"] == "cpu")
    assert target["metric"]["target_value"] > 0
    assert "blog post" in target["metric"]["extra_info"]["target_source"]
    assert not any(r["benchmark"]["extra_info"]["device"] == "cpu" and r["benchmark"]["extra_info"]["data"] ==
                   "synthetic" for r in rows)  # the failed case
