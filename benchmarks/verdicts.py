"""Prove the verdict rule on this machine: planted effects, real worker processes.

A workload (written to a temporary workload file) trains a small MLP whose forward pass repeats a
256x256 layer ``round(20 x factor)`` times; the factor comes from the environment of the worker
process, so a "slow" process does exactly 10% more work per step than a "base" one and nothing
else differs. Rounds run base, base-again and slow processes in rotating order (so slow drift of the
machine spreads over all three pools). Then, many times, DEFAULT_REPEATS (5) processes are drawn at
random from two pools and judged by the rule of compare/verdict.py:

  * base vs base-again (identical configurations): how often a difference is called (target <= 5%);
  * base vs slow (a real 10% slowdown): how often "slower" is called (target >= 80%).

The draws share processes, so they are not independent: the pool size limits how exact the rates
are (the number of processes per pool is printed). Run: ``.venv/bin/python benchmarks/verdicts.py``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from accelbench.compare.verdict import CANT_TELL, FASTER, SAME, SLOWER, judge
from accelbench.devices import DeviceSet
from accelbench.options import RunOptions, StopRule
from accelbench.repeat import DEFAULT_REPEATS, process_step_times
from accelbench.runner import Case, run_with_auto_batch
from accelbench.userfile import load_workload_file

FACTOR_VARIABLE = "ACCELBENCH_PLANTED_FACTOR"
WORKLOAD = '''
import os
import torch
from torch import nn
import accelbench
from accelbench.data.synthetic import synthetic_epoch


class Repeated(nn.Module):
    def __init__(self, repeats):
        super().__init__()
        self.layer, self.repeats = nn.Linear(256, 256), repeats

    def forward(self, x):
        for _ in range(self.repeats):
            x = torch.tanh(self.layer(x))
        return x


@accelbench.register
class Planted(accelbench.Workload):
    name = "planted"
    description = "an MLP whose work per step is scaled by the planted factor"
    modes = ("train",)
    default_batch_size = {"train": 64}
    dataset_size = {"train": 6400}

    def build_model(self):
        return Repeated(round(20 * float(os.environ.get("__FACTOR__", "1"))))

    def make_optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.001)

    def make_batches(self, mode, batch_size, options):
        return synthetic_epoch(lambda g, n: (torch.randn(n, 256, generator=g),),
                               self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model, batch):
        return model(batch[0]).pow(2).mean()
'''.replace("__FACTOR__", FACTOR_VARIABLE)


def one_process(case: Case, options: RunOptions, factor: float) -> float:
    os.environ[FACTOR_VARIABLE] = str(factor)  # inherited by the worker process
    result = run_with_auto_batch(case, options, None)
    assert result.ok, result.error
    return process_step_times(result)[0]


def rates(pool_a: list[float], pool_b: list[float], draws: int, rng: np.random.Generator) -> dict[str, float]:
    verdicts = [judge(list(rng.choice(pool_a, DEFAULT_REPEATS, replace=False)),
                      list(rng.choice(pool_b, DEFAULT_REPEATS, replace=False))).verdict
                for _ in range(draws)]
    return {name: verdicts.count(name) / draws for name in (FASTER, SLOWER, SAME, CANT_TELL)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="processes per pool (default 15)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per process")
    parser.add_argument("--slowdown", type=float, default=1.10)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--write-workload", type=Path, metavar="FILE.py",
                        help="only write the planted workload file (for accelbench run --workload-file)")
    args = parser.parse_args()
    if args.write_workload:
        args.write_workload.write_text(WORKLOAD)
        return
    folder = Path(tempfile.mkdtemp(prefix="accelbench-verdicts-"))
    workload_file = folder / "planted.py"
    workload_file.write_text(WORKLOAD)
    load_workload_file(workload_file)
    options = RunOptions(workloads=("planted",), stop=StopRule("steps", args.steps), threads=1,
                         workload_files=(str(workload_file),))
    case = Case("planted", "train", DeviceSet.current().select("cpu")[0], 64)
    pools: dict[str, list[float]] = {"base": [], "base-again": [], "slow": []}
    factors = {"base": 1.0, "base-again": 1.0, "slow": args.slowdown}
    names = list(pools)
    start, load_start = time.perf_counter(), os.getloadavg()
    for round_index in range(args.rounds):
        # Rotate the order so that no pool always runs first (or last) in a round.
        for name in names[round_index % 3:] + names[:round_index % 3]:
            pools[name].append(one_process(case, options, factors[name]))
    elapsed, load_end = time.perf_counter() - start, os.getloadavg()
    rng = np.random.default_rng(0)
    null = rates(pools["base"], pools["base-again"], args.draws, rng)
    planted = rates(pools["base"], pools["slow"], args.draws, rng)
    spread = {name: float(np.std(np.log(values), ddof=1)) for name, values in pools.items()}
    print(f"{args.rounds} processes per pool, {args.steps} steps each, 1 thread; {elapsed:.0f} s; "
          f"load average {load_start[0]:.1f} at start, {load_end[0]:.1f} at end ({os.cpu_count()} CPUs)")
    print("between-process spread (sd of log per-process median): "
          + ", ".join(f"{name} {value * 100:.1f}%" for name, value in spread.items()))
    print("median step: " + ", ".join(f"{name} {np.median(v) * 1e3:.2f} ms" for name, v in pools.items()))
    print(f"identical configurations, {DEFAULT_REPEATS} vs {DEFAULT_REPEATS} processes, {args.draws} draws: "
          f"called different {(null[FASTER] + null[SLOWER]) * 100:.1f}% "
          f"(same within noise {null[SAME] * 100:.1f}%, can't tell {null[CANT_TELL] * 100:.1f}%)")
    print(f"planted {(args.slowdown - 1) * 100:.0f}% slowdown, {DEFAULT_REPEATS} vs {DEFAULT_REPEATS} "
          "processes: "
          f"called slower {planted[SLOWER] * 100:.1f}%, faster {planted[FASTER] * 100:.1f}%, "
          f"can't tell {planted[CANT_TELL] * 100:.1f}%")


if __name__ == "__main__":
    main()
