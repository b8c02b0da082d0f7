"""accelbench's timed loop against a plain hand-written PyTorch loop (target: <= 2% slower).

Same model (pytorch/examples MNIST), batch, threads, optimizer, data and step count; the two run
back to back in alternating order for several rounds, each with a fresh model, after the same
warm-up. The figure is the ratio of the median per-step times over all rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from accelbench.data.options import DataOptions
from accelbench.devices import DeviceSet
from accelbench.engine.case import Case
from accelbench.engine.measure_case import run_case
from accelbench.measure.loop.step_loop import BatchStream, StepLoop
from accelbench.options import RunOptions, StopRule
from accelbench.workloads import get_workload_class


def plain_loop(steps: int, warmup: int, batch_size: int) -> float:
    """Mean seconds per step of the loop a user would write by hand."""
    torch.manual_seed(0)
    workload = get_workload_class("mnist")()
    model = workload.build_model()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    batches = iter(workload.make_batches("train", batch_size, DataOptions()))
    model.train()

    def step() -> None:
        images, labels = next(batches)
        optimizer.zero_grad()
        loss = F.nll_loss(model(images), labels)
        loss.backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def accelbench_loop(steps: int, warmup: int, batch_size: int) -> float:
    cpu = DeviceSet.current().select("cpu")[0]
    options = RunOptions(stop=StopRule("steps", steps), warmup_steps=warmup)
    result = run_case(Case(workload="mnist", mode="train", device=cpu, batch_size=batch_size), options)
    assert result.ok, result.error
    return result.measured_time_s / result.measured_steps


def loop_cost_per_step(steps: int = 20000) -> float:
    """Seconds per step that accelbench's loop itself adds: the same loop around a step that does
    nothing but return a finite scalar (the non-finite check included), minus a bare Python loop
    over the same batches calling the same function."""
    cpu = DeviceSet.current().select("cpu")[0]
    batches = [(torch.zeros(1),)] * 64
    done = torch.tensor(1.0)

    def step(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return done

    measured = StepLoop(step, batches, cpu).run(StopRule("steps", steps), warmup_steps=10)
    start = time.perf_counter()
    stream = BatchStream(batches)
    for _ in range(steps):
        step(stream.next())
    bare = (time.perf_counter() - start) / steps
    return measured.measured_time_s / measured.measured_steps - bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    plain, ours = [], []
    for round_ in range(args.rounds):
        order = [(plain, plain_loop), (ours, accelbench_loop)]
        if round_ % 2:
            order.reverse()
        for sink, loop in order:
            sink.append(loop(args.steps, args.warmup, args.batch_size))
        print(f"round {round_ + 1}: plain {plain[-1] * 1e3:.2f} ms/step, "
              f"accelbench {ours[-1] * 1e3:.2f} ms/step")
    ratio = statistics.median(ours) / statistics.median(plain)
    paired = [o - p for o, p in zip(ours, plain, strict=True)]
    print(f"threads {args.threads}, batch {args.batch_size}, {args.rounds} rounds x {args.steps} steps")
    print(f"median plain {statistics.median(plain) * 1e3:.2f} ms/step, accelbench "
          f"{statistics.median(ours) * 1e3:.2f} ms/step: accelbench/plain = {ratio:.4f} "
          f"({(ratio - 1) * 100:+.2f}%)")
    ratios = [o / p for o, p in zip(ours, plain, strict=True)]
    print(f"median of the per-round ratios (robust to a disturbed round): "
          f"{statistics.median(ratios):.4f} ({(statistics.median(ratios) - 1) * 100:+.2f}%)")
    print(f"paired differences per round: mean {statistics.mean(paired) * 1e3:+.2f} ms, "
          f"min {min(paired) * 1e3:+.2f} ms, max {max(paired) * 1e3:+.2f} ms")
    print(f"accelbench's loop machinery alone (no-op step): {loop_cost_per_step() * 1e6:.1f} us/step")


if __name__ == "__main__":
    main()
