"""The sustained verdict on a real slowdown: a steady CPU workload held for a duration, with
busy-loop processes started on the same cores part-way through.

The workload is a loop of float32 matrix products on the CPU (torch's threads pinned to the cores
the burners are pinned to; one core by default, where a burner's fair share leaves the workload
about half). After ``--burn-at`` of the run, ``--burners`` processes spinning in a
Python busy loop start on those cores, so the last half of the run (the sustained part) shares the
cores while the burst (the first fifth) did not. The verdict must then say "throttles", at about
the share of the cores the workload keeps, and name no sensor as the cause: a neighbour takes the
cores without moving the clock, temperature or power the way a thermal or power limit would
(where the CPU's clock does fall under the extra load, "clock down" is the honest answer).

Usage: ``python benchmarks/sustained.py --duration 40 --interval 2`` (a quiet machine gives the
clean figure; on a shared one other processes add their own slowdowns, and the run says so).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from accelbench.devices import Device
from accelbench.devices.cpu import CpuAdapter
from accelbench.devices.power import load_per_cpu
from accelbench.measure.loop.sustained import DeviceSensors, run_sustained
from accelbench.results.sustained import SustainedRecord, parts

BURN = "import os, sys\nos.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(',')})\n" \
       "while True:\n    pass\n"


def cores() -> set[int]:
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))


def start_burners(count: int, on: set[int]) -> list[subprocess.Popen[bytes]]:
    """``count`` busy-loop processes pinned to the cores ``on`` (the OS places them where it can
    where pinning is not available)."""
    listed = ",".join(str(c) for c in sorted(on))
    code = BURN if hasattr(os, "sched_setaffinity") else "while True:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code, listed]) for _ in range(count)]


def matmul_step(side: int, products: int) -> tuple[Callable[[], int], float]:
    a, b = torch.randn(side, side), torch.randn(side, side)

    def step() -> int:
        for _ in range(products):
            torch.mm(a, b)
        return 1

    return step, 2.0 * side ** 3 * products


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=40.0, help="seconds in all (default 40)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds per interval (default 2)")
    parser.add_argument("--burn-at", type=float, default=0.3,
                        help="share of the run after which the burners start (default 0.3)")
    parser.add_argument("--cores", type=int, default=1,
                        help="cores the workload (and the burners) run on, one torch thread each "
                             "(default 1: a fair share is then half, and OpenMP's barriers between "
                             "threads, which make a shared multi-core product collapse, stay out)")
    parser.add_argument("--burners", type=int, default=0, help="busy-loop processes (default: one a core)")
    parser.add_argument("--side", type=int, default=256, help="matrix side (default 256)")
    parser.add_argument("--products", type=int, default=4, help="products per step (default 4)")
    parser.add_argument("--json", type=Path, help="write the sustained record here")
    args = parser.parse_args()

    on = set(sorted(cores())[: max(1, args.cores)])
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, on)
    torch.set_num_threads(len(on))
    step, flop = matmul_step(args.side, args.products)
    for _ in range(20):  # warm-up: thread pool, allocator
        step()
    device = Device(CpuAdapter(), "cpu", 0)
    burners: list[subprocess.Popen[bytes]] = []
    started = time.perf_counter()
    burn_at = args.burn_at * args.duration
    load_before = load_per_cpu()

    def progress(done: float, total: float) -> None:
        if not burners and time.perf_counter() - started >= burn_at:
            burners.extend(start_burners(args.burners or len(on), on))
            print(f"  {done:5.1f} s: started {len(burners)} burner(s) on cores {sorted(on)}", flush=True)

    try:
        series = run_sustained(step, args.duration, args.interval, DeviceSensors(device),
                               progress=progress)
    finally:
        for process in burners:
            process.kill()
            process.wait()
    record = SustainedRecord.judge(series)
    figures = record.figures
    burst, sustained = parts(series)
    print(f"cores {sorted(on)}, torch threads {torch.get_num_threads()}, {args.side}² float32 x "
          f"{args.products} a step; load per CPU at the start {load_before.get('value', 'n/a')}")
    print("interval  end_s  steps/s   GFLOP/s  clock_MHz  temp_C  power_W  part")
    for i, (work, seconds, end) in enumerate(zip(series.work, series.seconds, series.ends, strict=True)):
        part = "burst" if burst.start <= i < burst.stop else "sustained" if i >= sustained.start else ""
        values = [series.sensors[name].values[i] for name in ("clock_mhz", "temperature_c", "power_w")]
        shown = ["n/a" if v is None else f"{v:.0f}" for v in values]
        print(f"{i:8d} {end:6.1f} {work / seconds:8.1f} {work * flop / seconds / 1e9:9.2f} "
              f"{shown[0]:>10} {shown[1]:>7} {shown[2]:>8}  {part}")
    print(f"burst {figures.burst:.1f} steps/s ({figures.burst_intervals} intervals), sustained "
          f"{figures.sustained:.1f} steps/s ({figures.sustained_intervals} intervals)")
    for name, words in figures.sensors.items():
        print(f"  {name}: {words}")
    print(f"verdict: {figures.describe()}")
    print(f"load per CPU at the end {load_per_cpu().get('value', 'n/a')}")
    if args.json:
        args.json.write_text(json.dumps(record.to_dict(), indent=1))


if __name__ == "__main__":
    main()
