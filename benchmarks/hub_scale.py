"""A hub of ten million results: ``hub compact``, then ``compare --against`` (target: under 5 s and
1 GB) and ``site`` (target: under 2 minutes) reading the Parquet shards through DuckDB, each
through the real CLI in a fresh process (wall time and the process's peak resident memory).

The collection is generated as bundles, the way a hub fills up: one line written by the real
``share`` code is the template, and each line is that template with its varied fields put in
and the content hash computed over the result (the bytes ``share`` would write: ``dump_line``'s
form, checked against ``parse_line`` for the first lines). 200,000 machines of 40 device models
(25 CUDA, 8 CPU, 5 MPS, 2 XPU), each running 3 of 36 kinds of work (workload x mode x precision x
batch) about 50 times; settings (threads, TF32, torch version) vary. Bundles of 10,000 lines.

Two collections are read:

  * mixed: the compacted hub (a user's case matches the rows of one key: about 1/36 of them);
  * same-work: the same shards with every row's key set to the user's (nothing can be passed
    over: the worst case for a reader), derived from the compacted shards with DuckDB.

Everything is written under ``--root`` (default /tmp/accelbench-hub-bench) and removed at the end
unless ``--keep``. The load average is printed with every figure: the machine may be shared.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import _record, timed  # noqa: E402

from accelbench.results.key import comparability_key  # noqa: E402
from accelbench.sharing.build import build_bundle  # noqa: E402
from accelbench.sharing.bundle import canonical, parse_line  # noqa: E402
from accelbench.sharing.shards import key_id  # noqa: E402
from accelbench.store.jsonfile import save_record  # noqa: E402

WORKLOADS = ("mnist", "vae", "resnet50")
MODES = ("train", "eval")
PRECISIONS = ("fp32", "tf32", "bf16")
BATCHES = (32, 64)
KINDS = ["cuda"] * 25 + ["cpu"] * 8 + ["mps"] * 5 + ["xpu"] * 2
DEVICE_MODELS = [f"Vendor {kind.upper()} Device {i:02d}" for i, kind in enumerate(KINDS)]
MACHINES = 200_000
LINES_PER_BUNDLE = 10_000
#: Varied fields of the template, as sentinels in its canonical text.
_SENTINEL = re.compile(r'"@(\w+)@"')


def _template() -> list[str]:
    """The canonical content of one real line, split around the fields a line varies."""
    line: dict[str, Any] = json.loads(build_bundle([_record()], "0" * 16).lines[0])
    content = {k: v for k, v in line.items() if k not in ("hash", "machine_id", "samples")}
    content["key"].update(workload="@workload@", mode="@mode@", precision="@precision@", batch_size="@batch@")
    content["device"].update(kind="@kind@", model="@model@")
    content["settings"]["threads"] = "@threads@"
    content["settings"]["backend_flags"]["cuda_matmul_allow_tf32"] = "@tf32@"
    content["software"]["torch"] = "@torch@"
    content["figures"]["samples_per_s"] = "@rate@"
    content.update(date="@date@", case_id="@case@")
    return _SENTINEL.split(canonical(content))


def _line(parts: list[str], values: dict[str, str], machine: str) -> str:
    body = "".join(values[part] if index % 2 else part for index, part in enumerate(parts))
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    return f'{{"hash":"{digest}","machine_id":"{machine}",' + body[1:]


_WORKS = [(w, m, p, b) for w in WORKLOADS for m in MODES for p in PRECISIONS for b in BATCHES]


def _machine(number: int) -> tuple[int, list[tuple[str, str, str, int]]]:
    """A machine's device model and the 3 kinds of work it runs (fixed per machine)."""
    return number % len(DEVICE_MODELS), random.Random(number).sample(_WORKS, 3)


def _write_bundles(task: tuple[str, int, int, int]) -> int:
    """Bundles ``first`` to ``last`` - 1 (each LINES_PER_BUNDLE lines) into ``folder``."""
    folder, first, last, total = task
    parts = _template()
    text = {value: json.dumps(value) for value in (*WORKLOADS, *MODES, *PRECISIONS, *KINDS, *DEVICE_MODELS,
                                                   "2.4.1", "2.5.1", "2.6.0")}
    dates = [json.dumps(f"2026-{1 + i % 11:02d}-{1 + i % 28:02d}") for i in range(11 * 28)]
    machines: dict[int, tuple[int, list[tuple[str, str, str, int]]]] = {}
    for bundle in range(first, last):
        rng = random.Random(bundle)
        lines = []
        for index in range(bundle * LINES_PER_BUNDLE, min((bundle + 1) * LINES_PER_BUNDLE, total)):
            number = index % MACHINES
            if number not in machines:
                machines[number] = _machine(number)
            model, works = machines[number]
            workload, mode, precision, batch = works[rng.randrange(3)]
            speed = (1000 + 200 * model) * (1.6 if precision == "bf16" else 1.0) * rng.uniform(0.85, 1.15)
            values = {"workload": text[workload], "mode": text[mode], "precision": text[precision],
                      "batch": str(batch), "kind": text[KINDS[model]], "model": text[DEVICE_MODELS[model]],
                      "threads": ("4", "8", "16")[rng.randrange(3)],
                      "tf32": "true" if rng.random() > 0.1 else "false",
                      "torch": text[("2.4.1", "2.5.1", "2.6.0")[rng.randrange(3)]],
                      "rate": repr(float(f"{speed:.6g}")), "date": dates[index % len(dates)],
                      "case": f'"{index:016x}"'}
            lines.append(_line(parts, values, f"{number:016x}"))
        Path(folder, f"bundle{bundle:05d}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return last - first


def generate(folder: Path, count: int, processes: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    bundles = -(-count // LINES_PER_BUNDLE)
    step = -(-bundles // (processes * 8))
    tasks = [(str(folder), start, min(start + step, bundles), count) for start in range(0, bundles, step)]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        pool.map(_write_bundles, tasks, chunksize=1)
    with (folder / "bundle00000.jsonl").open(encoding="utf-8") as handle:
        for _ in range(3):  # the generated lines are what share writes: they verify
            parse_line(handle.readline().rstrip("\n"))


def same_work(shards: Path, out: Path, key: tuple[Any, ...]) -> None:
    """The shards with every row's key (and key id) set to the user's ``key`` (mnist train fp32
    batch 64)."""
    import duckdb

    connection = duckdb.connect()
    connection.execute("SET memory_limit = '2GB'")
    connection.execute(f"SET temp_directory = '{out.parent / 'spill'}'")
    connection.execute(f"""COPY (SELECT * REPLACE ('mnist' AS workload, 'train' AS mode, 'fp32' AS precision,
                                                64 AS batch_size, '{key_id(key)}' AS key_id)
                                FROM read_parquet('{shards}/**/*.parquet', hive_partitioning = false))
                           TO '{out}' (FORMAT parquet, PARTITION_BY (mode, device_class), COMPRESSION zstd,
                                       ROW_GROUP_SIZE 122880, WRITE_PARTITION_COLUMNS true)""")


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=10_000_000)
    parser.add_argument("--root", type=Path, default=Path("/tmp/accelbench-hub-bench"))
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument("--reuse", action="store_true", help="reuse bundles and shards already under --root")
    parser.add_argument("--prepare-only", action="store_true",
                        help="generate and compact (e.g. at a lower priority), then stop; implies --keep")
    args = parser.parse_args()
    root: Path = args.root
    figures: dict[str, Any] = {"results": args.results, "cpus": os.cpu_count()}
    try:
        root.mkdir(parents=True, exist_ok=True)
        record = _record()
        record.cases[0].device_name = DEVICE_MODELS[0]
        mine = save_record(record, root / "mine.json")
        bundles, shards, worst = root / "bundles", root / "shards", root / "same-work"
        if not (args.reuse and bundles.exists()):
            started = time.perf_counter()
            generate(bundles, args.results, args.processes)
            figures["generate"] = {"wall_s": round(time.perf_counter() - started, 1), "load": _load(),
                                   "bytes": sum(p.stat().st_size for p in bundles.iterdir())}
        if not (args.reuse and shards.exists()):
            compacted = timed(["hub", "compact", str(bundles), "-o", str(shards)])
            figures["hub compact"] = {**compacted, "load": _load()}
            figures["shards bytes"] = sum(p.stat().st_size for p in shards.rglob("*.parquet"))
        if not (args.reuse and worst.exists()):
            same_work(shards, worst, comparability_key(record.cases[0]))
        print(json.dumps(figures, indent=1), flush=True)
        if args.prepare_only:
            return
        for name, folder in (("mixed", shards), ("same-work", worst)):
            for attempt in range(3):
                figures[f"{name} compare --against #{attempt + 1}"] = {
                    **timed(["compare", str(mine), "--against", str(folder)]), "load": _load()}
                print(json.dumps(figures, indent=1), flush=True)
        figures["site (mixed)"] = {**timed(["site", str(shards), "-o", str(root / "site")]), "load": _load()}
        figures["site pages"] = len(list((root / "site").iterdir()))
        print(json.dumps(figures, indent=1))
    finally:
        if not args.keep and not args.prepare_only:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
