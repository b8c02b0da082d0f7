"""A community collection at scale: ``compare --against`` (target: under 5 s and 1 GB over 100,000
results) and ``site`` (target: under a minute), through the real CLI in a fresh process.

The collection is generated: one line written by the real ``share`` code, then varied (workload,
mode, precision, batch, device model, machine, settings, figures) and re-hashed, split into
bundles of 1,000 lines in one folder, as a collected dataset would be. Two collections:

  * mixed: 36 workload/mode/precision/batch combinations, so a user's case matches a few percent of
    the lines (the loader passes over lines that cannot match without parsing them);
  * same-work: every line has the user's key (nothing can be passed over: the worst case).

Figures (wall time and peak memory of the child process) are printed as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from accelbench.options.recorded import RecordedRun
from accelbench.results import CaseResult, RunRecord
from accelbench.sharing.build import build_bundle
from accelbench.sharing.bundle import dump_line
from accelbench.store.jsonfile import save_record

WORKLOADS = ("mnist", "vae", "resnet50")
MODES = ("train", "eval")
PRECISIONS = ("fp32", "tf32", "bf16")
BATCHES = (32, 64)
MODELS = [f"Vendor Accelerator {i:02d}" for i in range(40)]
LINES_PER_BUNDLE = 1000


def _record(workload: str = "mnist", batch: int = 64, precision: str = "fp32") -> RunRecord:
    steps = [batch / 1000.0 * (1 + 0.01 * (i % 7)) for i in range(60)]
    case = CaseResult(workload=workload, mode="train", device="cuda:0", batch_size=batch, precision=precision,
                      device_name=MODELS[0], threads=8, step_times=steps, dataset_size=60000,
                      backend_flags={"cuda_matmul_allow_tf32": True, "cudnn_allow_tf32": True,
                                     "cudnn_benchmark": False, "float32_matmul_precision": "highest"})
    environment = {"machine": {"hostname": "bench", "system": "Linux", "release": "6.8.0"},
                   "torch": {"version": "2.6.0", "cuda_build": "12.4"},
                   "availability": {"cuda": {"count": 1}},
                   "devices": {"cpu": {"name": "Host CPU", "physical_cores": 8, "memory_total_bytes": 2**36},
                               "cuda:0": {"name": MODELS[0], "memory_total_bytes": 2**36}},
                   "power": {"power_source": {"value": "AC"}, "load_per_cpu": {"value": 0.1}}}
    return RunRecord("bench0000001", "2025-01-01T00:00:00+00:00", "0.1.0", environment=environment,
                     cases=[case], options=RecordedRun())


def generate(folder: Path, count: int, same_work: bool, seed: int = 0) -> None:
    rng = random.Random(seed)
    template = json.loads(build_bundle([_record()], "0" * 16).lines[0])
    folder.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    for index in range(count):
        line: dict[str, Any] = json.loads(json.dumps(template))
        if not same_work:
            line["key"].update(workload=rng.choice(WORKLOADS), mode=rng.choice(MODES),
                               precision=rng.choice(PRECISIONS), batch_size=rng.choice(BATCHES))
        model = rng.randrange(len(MODELS))
        line["device"]["model"] = MODELS[model]
        line["machine_id"] = f"{rng.randrange(5000):016x}"
        line["settings"]["threads"] = rng.choice((4, 8, 16))
        line["settings"]["backend_flags"]["cuda_matmul_allow_tf32"] = rng.random() > 0.1
        line["software"]["torch"] = rng.choice(("2.4.1", "2.5.1", "2.6.0"))
        rate = line["figures"]["samples_per_s"] = (1000 + 200 * model) * rng.uniform(0.8, 1.2)
        line["figures"]["median_step_s"] = line["figures"]["p10_step_s"] = line["key"]["batch_size"] / rate
        line["date"] = f"2025-{1 + index % 12:02d}-{1 + index % 28:02d}"
        # Each line is its own case of its own run (the loader drops a case its machine shared twice).
        line["case_id"] = f"{index:016x}"
        del line["hash"], line["bundle"]
        lines.append(dump_line(line))
        if len(lines) == LINES_PER_BUNDLE or index == count - 1:
            (folder / f"bundle{index // LINES_PER_BUNDLE:04d}.jsonl").write_text("\n".join(lines) + "\n")
            lines = []


#: Runs the CLI and reports the process's own peak resident memory (KiB) on stderr: VmHWM, the
#: high-water mark of this process's memory since its exec (getrusage's ru_maxrss on Linux keeps
#: the parent's mark across fork and exec, so a large parent inflates it).
_WRAPPER = ("import sys\nfrom accelbench.cli import main\ncode = main(sys.argv[1:])\n"
            "peak = next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM'))\n"
            "sys.stderr.write(f'\\nMAXRSS {peak}\\n')\n"
            "sys.exit(code)")


def _tree_rss(process: psutil.Process) -> int:
    """Resident bytes of ``process`` and its children (the loader's reading processes) together."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += member.memory_info().rss
    return total


def timed(argv: list[str]) -> dict[str, float]:
    """Wall seconds (interpreter start included) and peak resident memory of ``accelbench ARGV``
    in a fresh process: the process's own high-water mark, and the largest sum over it and its
    children (the processes that read a large collection), sampled every 20 ms."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", _WRAPPER, *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "100"})
    process, tree = psutil.Process(child.pid), 0
    while child.poll() is None:
        tree = max(tree, _tree_rss(process))
        time.sleep(0.02)
    _, stderr = child.communicate()
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"accelbench {' '.join(argv)} failed: {stderr.strip()}")
    peak_kib = int(stderr.rsplit("MAXRSS ", 1)[1].split()[0])
    return {"wall_s": round(wall, 2), "peak_rss_mib": round(peak_kib / 1024, 1),
            "peak_with_children_mib": round(max(tree, peak_kib * 1024) / 2**20, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        mine = save_record(_record(), root / "mine.json")
        figures: dict[str, Any] = {"results": args.results}
        for name, same in (("mixed", False), ("same-work", True)):
            folder = root / name
            started = time.perf_counter()
            generate(folder, args.results, same)
            figures[f"{name} generate_s"] = round(time.perf_counter() - started, 1)
            figures[f"{name} bytes"] = sum(p.stat().st_size for p in folder.iterdir())
            figures[f"{name} compare --against"] = timed(["compare", str(mine), "--against", str(folder)])
        figures["site (mixed)"] = timed(["site", str(root / "mixed"), "-o", str(root / "site")])
        figures["site pages"] = len(list((root / "site").iterdir()))
        print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
