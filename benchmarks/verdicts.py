"""Prove the verdict rule on this machine: planted effects, real worker processes.

A workload (written to a temporary workload file) trains a small MLP whose forward pass repeats a
256x256 layer ``round(20 x factor)`` times; the factor comes from the environment of the worker
process, so a "slow" process does exactly 10% more work per step than a "base" one and nothing
else differs. Rounds run base, base-again and slow processes in rotating order (so slow drift of the
machine spreads over all three pools). Then, many times, DEFAULT_REPEATS (10) processes are drawn at
random from two pools and judged by the rule of compare/verdict.py (on each process's
10th-percentile step time; ``--statistic all`` also shows what other per-process figures would give):

  * base vs base-again (identical configurations): how often a difference is called (target <= 5%);
  * base vs slow (a real 10% slowdown): how often "slower" is called (target >= 80%).

The draws share processes, so they are not independent: the pool size limits how exact the rates
are (the number of processes per pool is printed). Run: ``.venv/bin/python benchmarks/verdicts.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from accelbench.compare.verdict import CANT_TELL, FASTER, SAME, SLOWER, judge
from accelbench.devices import DeviceSet
from accelbench.engine.case import Case
from accelbench.engine.repeat import DEFAULT_REPEATS
from accelbench.engine.runner import run_with_auto_batch
from accelbench.options import RunOptions, StopRule
from accelbench.results.process import process_figure
from accelbench.workloads.catalogue import load_workload_file

PROCESS_STATISTIC = "p10"  # what compare judges: repeat.process_figure
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


def one_process(case: Case, options: RunOptions, factor: float) -> list[float]:
    """One fresh worker process's step times (seconds)."""
    os.environ[FACTOR_VARIABLE] = str(factor)  # inherited by the worker process
    result = run_with_auto_batch(case, options, None)
    assert result.ok, result.error
    return list(result.step_times)


#: Candidate per-process figures: the verdict's unit is one number per process.
STATISTICS: dict[str, Callable[[list[float]], float]] = {
    "median": lambda t: float(np.median(t)),
    "mean": lambda t: float(np.mean(t)),
    "p25": lambda t: float(np.percentile(t, 25)),
    "p10": process_figure,
    "min": lambda t: float(np.min(t)),
}


def rates(pool_a: list[float], pool_b: list[float], draws: int, rng: np.random.Generator,
          repeats: int) -> dict[str, float]:
    verdicts = [judge(list(rng.choice(pool_a, repeats, replace=False)),
                      list(rng.choice(pool_b, repeats, replace=False))).verdict
                for _ in range(draws)]
    return {name: verdicts.count(name) / draws for name in (FASTER, SLOWER, SAME, CANT_TELL)}


def analyse(data: dict, draws: int, repeats: int, statistic: str) -> None:
    figure = STATISTICS[statistic]
    pools = {name: [figure(times) for times in processes] for name, processes in data["pools"].items()}
    rng = np.random.default_rng(0)
    null = rates(pools["base"], pools["base-again"], draws, rng, repeats)
    planted = rates(pools["base"], pools["slow"], draws, rng, repeats)
    spread = {name: float(np.std(np.log(values), ddof=1)) for name, values in pools.items()}
    effect = np.median(pools["slow"]) / np.median(pools["base"]) - 1
    print(f"[{statistic}] spread (sd of log per-process {statistic}): "
          + ", ".join(f"{name} {value * 100:.1f}%" for name, value in spread.items())
          + f"; slow/base {effect * 100:+.1f}%")
    print(f"[{statistic}] identical, {repeats} vs {repeats}: called different "
          f"{(null[FASTER] + null[SLOWER]) * 100:.1f}% (same {null[SAME] * 100:.1f}%, "
          f"can't tell {null[CANT_TELL] * 100:.1f}%); planted: slower {planted[SLOWER] * 100:.1f}%, "
          f"faster {planted[FASTER] * 100:.1f}%, can't tell {planted[CANT_TELL] * 100:.1f}%")


def measure(args: argparse.Namespace) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="accelbench-verdicts-"))
    workload_file = folder / "planted.py"
    workload_file.write_text(WORKLOAD)
    load_workload_file(workload_file)
    stop = StopRule("steps", args.steps) if args.steps else StopRule()
    options = RunOptions(workloads=("planted",), stop=stop, threads=1,
                         workload_files=(str(workload_file),))
    case = Case(workload="planted", mode="train", device=DeviceSet.current().select("cpu")[0], batch_size=64)
    pools: dict[str, list[list[float]]] = {"base": [], "base-again": [], "slow": []}
    factors = {"base": 1.0, "base-again": 1.0, "slow": args.slowdown}
    names = list(pools)
    start, load_start = time.perf_counter(), os.getloadavg()
    for round_index in range(args.rounds):
        # Rotate the order so that no pool always runs first (or last) in a round.
        for name in names[round_index % 3:] + names[:round_index % 3]:
            pools[name].append(one_process(case, options, factors[name]))
    elapsed, load_end = time.perf_counter() - start, os.getloadavg()
    return {"rounds": args.rounds, "stop": stop.describe(), "slowdown": args.slowdown,
            "elapsed_s": elapsed, "load": [load_start[0], load_end[0]], "cpus": os.cpu_count(),
            "pools": pools}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="processes per pool (default 15)")
    parser.add_argument("--steps", type=int, default=0,
                        help="timed steps per process (default: accelbench's default stop rule)")
    parser.add_argument("--slowdown", type=float, default=1.10)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS,
                        help=f"processes a side in each comparison (default {DEFAULT_REPEATS})")
    parser.add_argument("--save", type=Path, metavar="FILE.json", help="keep every process's samples")
    parser.add_argument("--load", type=Path, metavar="FILE.json",
                        help="analyse samples saved by --save instead of measuring")
    parser.add_argument("--statistic", choices=[*STATISTICS, "all"], default=PROCESS_STATISTIC,
                        help=f"per-process figure judged (default {PROCESS_STATISTIC}, what compare uses)")
    parser.add_argument("--write-workload", type=Path, metavar="FILE.py",
                        help="only write the planted workload file (for accelbench run --workload-file)")
    args = parser.parse_args()
    if args.write_workload:
        args.write_workload.write_text(WORKLOAD)
        return
    data = json.loads(args.load.read_text()) if args.load else measure(args)
    if args.save and not args.load:
        args.save.write_text(json.dumps(data))
    steps = [len(t) for processes in data["pools"].values() for t in processes]
    print(f"{data['rounds']} processes per pool, {data['stop']} ({min(steps)}-{max(steps)} steps), "
          f"1 thread; {data['elapsed_s']:.0f} s; load average {data['load'][0]:.1f} at start, "
          f"{data['load'][1]:.1f} at end ({data['cpus']} CPUs)")
    for statistic in (STATISTICS if args.statistic == "all" else [args.statistic]):
        analyse(data, args.draws, args.repeats, statistic)


if __name__ == "__main__":
    main()
