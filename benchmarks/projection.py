"""The default projected epoch time against a measured full epoch on the CPU (target: within 5%).

For each mode of the MNIST workload: one run with the default stop rule (time budget) gives the
projected epoch time; one run with ``--epochs 1`` measures a whole epoch. Runs alternate and repeat.

Beside the error, the coverage: how often the measured epoch falls inside the projected 95%
interval. With ``--processes K`` the projection comes from K fresh worker processes (as ``run
--repeat K`` measures it), so its interval includes the spread between processes.
"""

from __future__ import annotations

import argparse

import torch

from accelbench.devices import DeviceSet
from accelbench.engine.case import Case
from accelbench.engine.measure_case import run_case
from accelbench.engine.repeat import merge_repeats
from accelbench.engine.runner import run_with_auto_batch
from accelbench.options import RunOptions, StopRule


def epoch_time(mode: str, stop: StopRule, batch: int, processes: int = 1) -> tuple[float, float, float, str]:
    cpu = DeviceSet.current().select("cpu")[0]
    case = Case(workload="mnist", mode=mode, device=cpu, batch_size=batch)
    if processes > 1:
        options = RunOptions(stop=stop, repeat=processes)
        result = merge_repeats([run_with_auto_batch(case, options, None) for _ in range(processes)])
    else:
        result = run_case(case, RunOptions(stop=stop))
    assert result.ok, result.error
    figure = result.epoch_time()
    assert figure is not None
    return figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--modes", default="eval,train")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--processes", type=int, default=1,
                        help="worker processes behind each projection (default 1: in this process)")
    args = parser.parse_args()
    inside = pairs = 0
    print(f"torch threads {torch.get_num_threads()}")
    for mode in args.modes.split(","):
        batch = 64 if mode == "train" else 1000
        for repeat in range(args.repeats):
            # Alternate which run goes first, so a machine that speeds up or slows down over
            # minutes does not always favour the same side.
            if repeat % 2:
                measured = epoch_time(mode, StopRule("epochs", 1), batch)
                projected = epoch_time(mode, StopRule(), batch, args.processes)
            else:
                projected = epoch_time(mode, StopRule(), batch, args.processes)
                measured = epoch_time(mode, StopRule("epochs", 1), batch)
            error = projected[0] / measured[0] - 1
            covered = projected[1] <= measured[0] <= projected[2]
            inside, pairs = inside + covered, pairs + 1
            print(f"{mode} #{repeat + 1}: projected {projected[0]:.2f} s "
                  f"(95% CI {projected[1]:.2f}-{projected[2]:.2f}), measured {measured[0]:.2f} s, "
                  f"difference {error * 100:+.2f}%, {'inside' if covered else 'outside'} the interval")
    print(f"coverage: the measured epoch fell inside the projected 95% interval in {inside} of {pairs} "
          f"pairs ({args.processes} process{'es' if args.processes > 1 else ''} per projection)")


if __name__ == "__main__":
    main()
