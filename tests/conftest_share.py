"""Records and bundles for the sharing, peers and site tests: several device models, each result
built by the real ``share`` code from a stored-run record (no bundle line is written by hand).

Imported explicitly by those tests (like conftest_report.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from accelbench.options.recorded import RecordedRun
from accelbench.results import CaseResult, RunRecord
from accelbench.sharing.build import build_bundle

TF32_ON = {"float32_matmul_precision": "highest", "cuda_matmul_allow_tf32": True, "cudnn_allow_tf32": True,
           "cudnn_benchmark": False}
TF32_OFF = {**TF32_ON, "cuda_matmul_allow_tf32": False, "cudnn_allow_tf32": False}
CPU_FLAGS = {"float32_matmul_precision": "highest", "cuda_matmul_allow_tf32": False,
             "cudnn_allow_tf32": False, "cudnn_benchmark": False}

#: Device model -> (device, median samples/s of mnist train batch 64, number of machines).
MODELS: dict[str, tuple[str, float, int]] = {
    "NVIDIA H100 80GB HBM3": ("cuda:0", 40000.0, 12),
    "Apple M2 GPU (MPS)": ("mps", 3000.0, 8),
    "AMD EPYC 7763 64-Core Processor": ("cpu", 900.0, 10),
    "NVIDIA GeForce RTX 4090": ("cuda:0", 30000.0, 3),
}

H100_MODEL, EPYC_MODEL = "NVIDIA H100 80GB HBM3", "AMD EPYC 7763 64-Core Processor"


def steps_for(throughput: float, batch: int = 64, n: int = 40, seed: int = 0,
              spread: float = 0.01) -> list[float]:
    rng = np.random.default_rng(seed)
    median = batch / throughput
    return [float(v) for v in median * (1 + spread * rng.standard_normal(n)).clip(0.9, 1.1)]


def environment(device: str, model: str, *, hostname: str = "peer-host", threads_cores: int = 64,
                power: dict[str, Any] | None = None, torch: str = "2.6.0") -> dict[str, Any]:
    kind = device.split(":", 1)[0]
    devices: dict[str, Any] = {"cpu": {"name": model if kind == "cpu" else "Some CPU",
                                       "physical_cores": threads_cores, "memory_total_bytes": 64 * 2**30}}
    if kind != "cpu":
        devices[device] = {"name": model, "memory_total_bytes": 80 * 2**30}
        if kind == "cuda":
            devices[device]["compute_capability"] = "9.0"
    return {"machine": {"hostname": hostname, "system": "Darwin" if kind == "mps" else "Linux",
                        "release": "6.8.0", "architecture": "x86_64"},
            "python": {"version": "3.11.7", "executable": "/usr/bin/python3"},
            "torch": {"version": torch, "cuda_build": "12.4" if kind == "cuda" else None},
            "availability": {kind: {"count": 1}}, "devices": devices,
            "power": power or {"power_source": {"value": "AC"}, "load_per_cpu": {"value": 0.1},
                               "macos_power_mode": {"value": {"lowpowermode": "0"}} if kind == "mps"
                               else {"na": "not macOS"}}}


def result(model: str, throughput: float, *, seed: int = 0, threads: int = 64, flags: dict | None = None,
           batch: int = 64, workload: str = "mnist", data: str = "synthetic", **fields: Any) -> CaseResult:
    device = fields.pop("device", MODELS.get(model, ("cpu",))[0])
    kind = device.split(":", 1)[0]
    fields.setdefault("step_times", steps_for(throughput, batch, seed=seed))
    return CaseResult(workload=workload, mode="train", device=device, batch_size=batch, device_name=model,
                      threads=threads, data=data, dataset_size=60000,
                      backend_flags=flags if flags is not None
                      else (TF32_ON if kind == "cuda" else CPU_FLAGS),
                      **fields)


def run(run_id: str, cases: list[CaseResult], env: dict[str, Any], **fields: Any) -> RunRecord:
    return RunRecord(run_id=run_id, created_at="2025-03-04T05:06:07+00:00", accelbench_version="0.1.0",
                     command=["accelbench", "run", "mnist"], options=RecordedRun(), environment=env,
                     cases=cases, **fields)


def peer_records(seed: int = 1) -> list[RunRecord]:
    """Every model's machines, one run each, spread +-8% around the model's median; two H100s
    ran with TF32 off (and so measured far less), so the peers themselves show what TF32 does."""
    rng = np.random.default_rng(seed)
    records = []
    for model, (device, median, machines) in MODELS.items():
        for index in range(machines):
            tf32_off = model.startswith("NVIDIA H100") and index < 2
            speed = median * (0.13 if tf32_off else float(rng.uniform(0.92, 1.08)))
            case = result(model, speed, seed=index, flags=TF32_OFF if tf32_off else None)
            records.append(run(f"{abs(hash(model)) % 10**6:06d}{index:06d}", [case],
                               environment(device, model)))
    return records


def write_bundle(path: Path, records: list[RunRecord], machine_id: str = "0123456789abcdef") -> Path:
    bundle = build_bundle(records, machine_id)
    path.write_text(bundle.text(), encoding="utf-8")
    return path


def write_peer_bundles(folder: Path) -> Path:
    """A folder of bundles, one per machine (each with its own machine id)."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, record in enumerate(peer_records()):
        write_bundle(folder / f"machine{index:03d}.jsonl", [record], machine_id=f"{index:016x}")
    return folder
