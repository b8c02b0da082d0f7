"""The default projected epoch time against a measured full epoch on the CPU (target: within 5%).

For each mode of the MNIST workload: one run with the default stop rule (time budget) gives the
projected epoch time; one run with ``--epochs 1`` measures a whole epoch. Runs alternate and repeat.
"""

from __future__ import annotations

import argparse

import torch

from accelbench.devices import DeviceSet
from accelbench.options import RunOptions, StopRule
from accelbench.runner import Case, run_case


def epoch_time(mode: str, stop: StopRule, batch: int) -> tuple[float, float, float, str]:
    cpu = DeviceSet.current().select("cpu")[0]
    result = run_case(Case("mnist", mode, cpu, batch), RunOptions(stop=stop))
    assert result.ok, result.error
    figure = result.epoch_time()
    assert figure is not None
    return figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--modes", default="eval,train")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(f"torch threads {torch.get_num_threads()}")
    for mode in args.modes.split(","):
        batch = 64 if mode == "train" else 1000
        for repeat in range(args.repeats):
            # Alternate which run goes first, so a machine that speeds up or slows down over
            # minutes does not always favour the same side.
            if repeat % 2:
                measured = epoch_time(mode, StopRule("epochs", 1), batch)
                projected = epoch_time(mode, StopRule(), batch)
            else:
                projected = epoch_time(mode, StopRule(), batch)
                measured = epoch_time(mode, StopRule("epochs", 1), batch)
            error = projected[0] / measured[0] - 1
            print(f"{mode} #{repeat + 1}: projected {projected[0]:.2f} s "
                  f"(95% CI {projected[1]:.2f}-{projected[2]:.2f}), measured {measured[0]:.2f} s, "
                  f"difference {error * 100:+.2f}%")


if __name__ == "__main__":
    main()
