"""Does the default (a worker process per case) read what a plain hand-written loop reads?

Target (issue 10): the default isolation within 3% of a plain loop, on ResNet-50 and MNIST.

Three contenders run the same training step (same model, batch, optimiser, threads, data pool,
warm-up and step count), each in a FRESH Python process so none inherits another's allocator or
thread state:

- ``plain``:   the loop a user writes by hand (this file, ``--plain-child``), timing each step;
- ``process``: ``accelbench run ... --isolation process`` (the default: a worker per case);
- ``none``:    ``accelbench run ... --isolation none`` (the case inline in the CLI process).

They run interleaved, the order rotating every round, so slow drift of this shared machine spreads
over all of them. The figure per contender and round is the median step time; the verdict uses
the median over rounds of the per-round ratio to ``plain`` (robust to a disturbed round).

    .venv/bin/python benchmarks/isolation.py --workload resnet50 --batch-size 16 --rounds 4
    .venv/bin/python benchmarks/isolation.py --workload mnist --rounds 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONTENDERS = ("plain", "process", "none")


def plain_child(workload_name: str, batch_size: int, steps: int, warmup: int) -> None:
    """The hand-written loop: print one JSON line with the per-step times."""
    import torch

    from accelbench.workloads import get_workload_class
    from accelbench.workloads.base import DataOptions

    torch.manual_seed(0)
    workload = get_workload_class(workload_name)()
    model = workload.build_model()
    optimizer = workload.make_optimizer(model)
    batches = list(workload.make_batches("train", batch_size, DataOptions()).pool)
    model.train()
    times = []
    for step in range(warmup + steps):
        batch = batches[step % len(batches)]
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        workload.training_loss(model, batch).backward()
        optimizer.step()
        if step >= warmup:
            times.append(time.perf_counter() - start)
    print(json.dumps({"step_times": times}))


def _accelbench(binary: Path, isolation: str, args: argparse.Namespace, folder: Path) -> list[float]:
    out = folder / f"{isolation}.json"
    command = [str(binary), "run", args.workload, "--device", "cpu", "--mode", "train",
               "--batch-size", str(args.batch_size), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--isolation", isolation, "--quiet", "-o", str(out),
               "--db", str(folder / "history.sqlite")]
    subprocess.run(command, check=True, capture_output=True, text=True,
                   env={**os.environ, "ACCELBENCH_HOME": str(folder)})
    case = json.loads(out.read_text())["cases"][0]
    if case["status"] != "ok":
        raise SystemExit(f"accelbench {isolation}: {case['status']}: {case['error']}")
    return list(case["step_times"])


def _plain(args: argparse.Namespace) -> list[float]:
    command = [sys.executable, __file__, "--plain-child", "--workload", args.workload,
               "--batch-size", str(args.batch_size), "--steps", str(args.steps),
               "--warmup", str(args.warmup)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return list(json.loads(done.stdout.strip().splitlines()[-1])["step_times"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--plain-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_child:
        plain_child(args.workload, args.batch_size, args.steps, args.warmup)
        return
    binary = Path(sys.executable).with_name("accelbench")
    medians: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    with tempfile.TemporaryDirectory(prefix="accelbench-isolation-") as tmp:
        folder = Path(tmp)
        for round_ in range(args.rounds):
            order = CONTENDERS[round_ % 3:] + CONTENDERS[:round_ % 3]
            for name in order:
                times = _plain(args) if name == "plain" else _accelbench(binary, name, args, folder)
                medians[name].append(statistics.median(times))
            print(f"round {round_ + 1}: " + ", ".join(
                f"{name} {medians[name][-1] * 1e3:.1f} ms" for name in CONTENDERS), flush=True)
    print(f"{args.workload} train, batch {args.batch_size}, {args.rounds} rounds x {args.steps} steps "
          f"(warm-up {args.warmup}); figure: samples/s relative to the plain loop")
    for name in ("process", "none"):
        ratios = [p / m for p, m in zip(medians["plain"], medians[name], strict=True)]
        print(f"  {name:8s} median of per-round ratios {statistics.median(ratios):.3f} "
              f"(rounds: {', '.join(f'{r:.3f}' for r in ratios)})")


if __name__ == "__main__":
    main()
