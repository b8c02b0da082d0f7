"""``export --format hud``: a stored run in the PyTorch OSS benchmark database's format (schema v3,
the ``benchmark.oss_ci_benchmark_v3`` table behind hud.pytorch.org's dashboards, which vLLM and
PyTorch's own benchmarks upload to): a JSON list with one record per metric.

Each record (the table's tuple fields; maps are string to string, as the table's
``Map(String, String)``)::

    benchmark     name "accelbench", mode (training | inference), dtype (the case's precision),
                  extra_info: the rest of the comparability key, the device, the phase, run id
    model         name (the workload), type, backend (the compile back end, or eager),
                  origins ["accelbench"], extra_info
    metric        name (the catalogue's figure name), benchmark_values [the figure],
                  target_value (a published reference's figure for the same work; the key is
                  left out where there is none, as vLLM's uploads leave it out, never a 0 that
                  reads as a target of zero), extra_info: unit, statistic, label, how it was
                  measured, and the target's source; on fraction_of_peak,
                  peak_mark where the peak was capped, busy or re-checked on a busy machine
    runners       [{name (the device kind), type (its model), cpu_info, cpu_count, mem_info,
                  avail_mem_in_gb, gpu_info, gpu_count, gpu_mem_info, avail_gpu_mem_in_gb,
                  extra_info}]
    dependencies  {torch, python, accelbench: {repo, branch, sha, version, extra_info}}

The figures are read through the bundle line ``share`` would write (``sharing/build.case_line``),
so the export says what every other surface says (the catalogue's figures, by name). A case that
did not finish has no metric and no record.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from accelbench import __version__
from accelbench.compare.peers import published_peers
from accelbench.render.peak_marks import mark_words
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import BY_NAME, headline
from accelbench.results.key import KEY_FIELDS, comparability_key
from accelbench.sharing.build import case_line

BENCHMARK_NAME = "accelbench"
#: The HUD's two modes: a training step, or anything that only runs the model forward.
HUD_MODE = {"train": "training", "eval": "inference", "generate": "inference"}
_GIB = 1024**3


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _strings(mapping: dict[str, Any]) -> dict[str, str]:
    return {str(k): _text(v) for k, v in mapping.items() if v is not None and v != ""}


def _gib(value: Any) -> int:
    return int(value // _GIB) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _runner(line: dict[str, Any]) -> dict[str, Any]:
    device, host, software = line["device"], line["host"], line["software"]
    accelerator = device["kind"] != "cpu"
    return {"name": device["kind"], "type": _text(device.get("model")), "cpu_info": _text(host.get("cpu")),
            "cpu_count": int(host.get("cores") or 0), "mem_info": "",
            "avail_mem_in_gb": _gib(host.get("memory_bytes")),
            "gpu_info": _text(device.get("model")) if accelerator else "",
            "gpu_count": int(device.get("count") or 0) if accelerator else 0, "gpu_mem_info": "",
            "avail_gpu_mem_in_gb": _gib(device.get("memory_bytes")) if accelerator else 0,
            "extra_info": _strings({"os": host.get("os"), "os_release": host.get("os_release"),
                                    "architecture": host.get("architecture"),
                                    "compute_capability": device.get("compute_capability"),
                                    "driver_version": device.get("driver_version"),
                                    "cuda": software.get("cuda"), "hip": software.get("hip")})}


def _dependencies(record: RunRecord, line: dict[str, Any]) -> dict[str, Any]:
    software, host = line["software"], line["host"]
    return {"torch": {"repo": "pytorch/pytorch", "branch": "", "sha": "",
                      "version": _text(software.get("torch")),
                      "extra_info": _strings({"cuda": software.get("cuda"), "hip": software.get("hip"),
                                              "cudnn": software.get("cudnn"), "blas": software.get("blas")})},
            "python": {"repo": "", "branch": "", "sha": "", "version": _text(host.get("python")),
                       "extra_info": {}},
            "accelbench": {"repo": "", "branch": "", "sha": "", "version": _text(record.accelbench_version),
                           "extra_info": {"exported_by": __version__}}}


def _target(case: CaseResult, name: str) -> tuple[float | None, str]:
    """A published figure for the same work (the headline rate only), and its source; None and
    "" where there is none."""
    if name != headline(case.mode).name:
        return None, ""
    key = comparability_key(case)
    same = [p for p in published_peers(case.workload, case.mode, case.dataset_size or 0) if p.key == key
            and p.device_kind == case.device.split(":", 1)[0]]
    if not same:
        return None, ""
    best = max(same, key=lambda p: p.throughput)
    return best.throughput, f"{best.device_model}: {best.published}"


def case_records(record: RunRecord, case: CaseResult) -> list[dict[str, Any]]:
    """One record per figure the case has (none for a case that did not finish)."""
    if not case.ok or case.skipped:
        return []
    line = case_line(record, case, "")
    key = dict(zip(KEY_FIELDS, comparability_key(case), strict=True))
    rest = {k: v for k, v in key.items() if k not in ("workload", "precision")}
    benchmark = {"name": BENCHMARK_NAME, "mode": HUD_MODE.get(case.mode, case.mode),
                 "dtype": case.precision,
                 "extra_info": _strings({**rest, "device": case.device, "run_id": record.run_id,
                                         "phase": case.mode, "rate_unit": line.get("rate_unit")})}
    model = {"name": case.workload, "type": "accelbench workload", "backend": case.compile_backend or "eager",
             "origins": ["accelbench"], "extra_info": _strings({"workload_version": case.workload_version,
                                                                 "size": case.size})}
    common = {"benchmark": benchmark, "model": model, "runners": [_runner(line)],
              "dependencies": _dependencies(record, line), "timestamp": _timestamp(record.created_at),
              "schema_version": "v3", "name": BENCHMARK_NAME}
    records = []
    for name, value in line["figures"].items():
        figure = BY_NAME.get(name)
        if figure is None or not isinstance(value, int | float) or isinstance(value, bool):
            continue
        target, source = _target(case, name)
        # a share of a capped, busy or busily re-checked peak says so (render/peak_marks.py)
        mark = mark_words(case.flops) if name == "fraction_of_peak" else ""
        metric: dict[str, Any] = {"name": name, "benchmark_values": [float(value)]}
        if target is not None:
            metric["target_value"] = target
        metric["extra_info"] = _strings({"unit": figure.unit, "statistic": figure.statistic,
                                         "label": figure.label, "method": figure.method,
                                         "target_source": source, "peak_mark": mark})
        records.append({**common, "metric": metric})
    return records


def _timestamp(created_at: str) -> int:
    try:
        return int(datetime.fromisoformat(created_at).timestamp())
    except ValueError:
        return 0


def to_hud(record: RunRecord) -> str:
    rows = [row for case in record.cases for row in case_records(record, case)]
    return json.dumps(rows, indent=1, allow_nan=False) + "\n"
