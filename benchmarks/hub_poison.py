"""A hub poisoned by ten forged machines (issue 34): a million lines of one kind of CPU work, ten
machines claiming about 1,000x the honest rate (each line consistent with itself: rate and step
times scaled together, so only the quarantine can catch them), and forged lines under victims'
machine and case ids filed under an earlier path. ``hub compact`` (real CLI, fresh process: wall
time and peak memory), then what the hub says:

  * the forged machines' rows: all quarantined? (a 99.5th percentile let them set it);
  * the i7 group's best and the CPU band's 99th percentile (``hub aggregate``): in the honest range?
  * the victims' genuine lines: kept, in the band (signed victims), or in conflict (unsigned ones)?
  * what verifying the signed lines cost (``--signed`` of the machines sign their lines).

The lines are the real ``share`` line as a template with its varied fields put in and the content
hash computed (``dump_line``'s form; the first lines are checked with ``parse_line``).
Everything is written under ``--root`` and removed at the end unless ``--keep``.
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
from peers import timed  # noqa: E402

from accelbench.options.recorded import RecordedRun  # noqa: E402
from accelbench.results import CaseResult, RunRecord  # noqa: E402
from accelbench.sharing.build import build_bundle  # noqa: E402
from accelbench.sharing.bundle import canonical, parse_line  # noqa: E402
from accelbench.sharing.signing import Signer  # noqa: E402

#: 20 CPU models, each with its own honest median rate (12-36 samples/s: the range the issue saw).
MODELS = [f"Vendor CPU {i:02d}" for i in range(20)]
VICTIM_MODEL = MODELS[7]
LINES_PER_BUNDLE = 10_000
FORGED_MACHINES = 10
_SENTINEL = re.compile(r'"@(\w+)@"')


def _template() -> list[str]:
    steps = [64 / 24.0 * (1 + 0.01 * (i % 7)) for i in range(60)]
    case = CaseResult(workload="mnist", mode="train", device="cpu", batch_size=64, device_name=MODELS[0],
                      threads=8, step_times=steps, dataset_size=60000,
                      backend_flags={"float32_matmul_precision": "highest"})
    environment = {"machine": {"hostname": "bench", "system": "Linux", "release": "6.8.0"},
                   "torch": {"version": "2.6.0"}, "availability": {"cpu": {"count": 1}},
                   "devices": {"cpu": {"name": MODELS[0], "physical_cores": 8, "memory_total_bytes": 2**36}},
                   "power": {"power_source": {"value": "AC"}, "load_per_cpu": {"value": 0.1}}}
    record = RunRecord("poison000001", "2026-01-01T00:00:00+00:00", "0.1.0", environment=environment,
                       cases=[case], options=RecordedRun())
    line: dict[str, Any] = json.loads(build_bundle([record], "0" * 16).lines[0])
    content = {k: v for k, v in line.items() if k not in ("hash", "machine_id", "samples")}
    content["device"]["model"] = "@model@"
    content["figures"].update(samples_per_s="@rate@", median_step_s="@median@", p10_step_s="@p10@",
                              mean_step_s="@mean@", rate_ci="@ci@")
    content.update(case_id="@case@")
    return _SENTINEL.split(canonical(content))


def _line(parts: list[str], values: dict[str, str], machine: str, signer: Signer | None) -> str:
    body = "".join(values[part] if index % 2 else part for index, part in enumerate(parts))
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    text = f'{{"hash":"{digest}","machine_id":"{machine}",' + body[1:]
    return signer.sign_line(text) if signer is not None else text


def _values(model: int, rate: float, case: str) -> dict[str, str]:
    median = 64 / rate
    return {"model": json.dumps(MODELS[model]), "rate": repr(float(f"{rate:.6g}")),
            "median": repr(float(f"{median:.6g}")), "p10": repr(float(f"{median * 0.99:.6g}")),
            "mean": repr(float(f"{median * 1.01:.6g}")),
            "ci": canonical([float(f"{rate * 0.99:.6g}"), float(f"{rate * 1.01:.6g}")]), "case": f'"{case}"'}


def _signer(number: int, signed: float) -> Signer | None:
    """Machine ``number``'s key (derived from its number, so every process makes the same), for the
    ``signed`` fraction of machines."""
    if random.Random(number * 7919).random() >= signed:
        return None
    return Signer(hashlib.sha256(f"machine {number}".encode()).hexdigest())


def _machine_id(number: int, signer: Signer | None) -> str:
    return signer.machine_id if signer is not None else f"{number:016x}"


def _write(task: tuple[str, int, int, int, int, float]) -> int:
    folder, first, last, total, machines, signed = task
    parts = _template()
    for bundle in range(first, last):
        rng, lines = random.Random(bundle), []
        for index in range(bundle * LINES_PER_BUNDLE, min((bundle + 1) * LINES_PER_BUNDLE, total)):
            number = index % machines
            model = number % len(MODELS)
            speed = (12 + 24 * model / (len(MODELS) - 1)) * random.Random(number).uniform(0.9, 1.1)
            signer = _signer(number, signed)
            values = _values(model, speed * rng.uniform(0.97, 1.03), f"{index:016x}")
            lines.append(_line(parts, values, _machine_id(number, signer), signer))
        Path(folder, f"2026-05-{bundle:05d}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return last - first


def generate(folder: Path, count: int, machines: int, signed: float, processes: int) -> dict[str, Any]:
    """The honest hub, the forged machines' bundle and the forgeries of victims' lines (under an
    earlier name: met first); what was planted."""
    folder.mkdir(parents=True, exist_ok=True)
    bundles = -(-count // LINES_PER_BUNDLE)
    step = max(1, -(-bundles // (processes * 8)))
    tasks = [(str(folder), start, min(start + step, bundles), count, machines, signed)
             for start in range(0, bundles, step)]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        pool.map(_write, tasks, chunksize=1)
    parts = _template()
    forged = [_line(parts, _values(MODELS.index(VICTIM_MODEL), 18_298.0 * (1 + i / 100), f"f{i:015x}"),
                    f"f{i:015x}", None) for i in range(FORGED_MACHINES)]
    # Victims: the first lines of machines of the victim model, one signed and one not (if any).
    victims, planted = [], []
    for index in range(min(count, machines)):
        if index % len(MODELS) != MODELS.index(VICTIM_MODEL):
            continue
        signer = _signer(index, signed)
        if any((signer is None) == (v[1] is None) for v in victims):
            continue
        victims.append((index, signer))
        values = _values(MODELS.index(VICTIM_MODEL), 18_298.0, f"{index:016x}")
        planted.append(_line(parts, values, _machine_id(index, signer), None))  # unsigned forgery
        if len(victims) == 2:
            break
    (folder / "0000-earlier.jsonl").write_text("\n".join(planted) + "\n", encoding="utf-8")
    (folder / "2026-05-forged.jsonl").write_text("\n".join(forged) + "\n", encoding="utf-8")
    with (folder / "2026-05-00000.jsonl").open(encoding="utf-8") as handle:
        for _ in range(3):
            parse_line(handle.readline().rstrip("\n"))
    return {"forged_machines": [f"f{i:015x}" for i in range(FORGED_MACHINES)],
            "victims": [{"machine": _machine_id(i, s), "signed": s is not None, "case": f"{i:016x}"}
                        for i, s in victims]}


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def verdicts(shards: Path, bands: Path, planted: dict[str, Any]) -> dict[str, Any]:
    import duckdb

    connection = duckdb.connect()
    rows = f"read_parquet('{shards}/**/*.parquet')"
    forged = connection.execute(f"SELECT count(*) FILTER (outlier <> ''), count(*) FROM {rows} WHERE "
                                f"list_contains({planted['forged_machines']!r}, machine_id)").fetchone()
    best = connection.execute(f"SELECT max(rate) FROM (SELECT machine_id, median(rate) AS rate FROM {rows} "
                              f"WHERE device_model = '{VICTIM_MODEL}' AND implausible = '' AND outlier = '' "
                              "GROUP BY ALL)").fetchone()[0]
    victims = []
    for victim in planted["victims"]:
        found = connection.execute(f"SELECT rate, outlier FROM {rows} WHERE machine_id = "
                                   f"'{victim['machine']}' AND case_id = '{victim['case']}'").fetchall()
        victims.append({**victim, "rows": [(rate, outlier[:40]) for rate, outlier in found]})
    (band,) = json.loads(bands.read_text())["bands"]
    return {"forged rows quarantined": f"{forged[0]} of {forged[1]}",
            f"{VICTIM_MODEL} best (honest range 12-36)": round(best, 2),
            "cpu band p99": round(band["percentiles"][98], 2), "cpu band machines": band["machines"],
            "victims' case rows": victims}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=1_000_000)
    parser.add_argument("--machines", type=int, default=100_000)
    parser.add_argument("--signed", type=float, default=0.1, help="fraction of machines that sign")
    parser.add_argument("--root", type=Path, default=Path("/tmp/accelbench-hub-poison"))
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    root: Path = args.root
    figures: dict[str, Any] = {"results": args.results, "machines": args.machines, "signed": args.signed,
                               "cpus": os.cpu_count()}
    try:
        started = time.perf_counter()
        planted = generate(root / "bundles", args.results, args.machines, args.signed, args.processes)
        figures["generate"] = {"wall_s": round(time.perf_counter() - started, 1), "load": _load()}
        compacted = timed(["hub", "compact", str(root / "bundles"), "-o", str(root / "shards")])
        figures["hub compact"] = {**compacted, "load": _load()}
        timed(["hub", "aggregate", str(root / "shards"), "-o", str(root / "bands.json")])
        figures.update(verdicts(root / "shards", root / "bands.json", planted))
        figures["manifest"] = json.loads((root / "shards" / "compacted.json").read_text())
        print(json.dumps(figures, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
