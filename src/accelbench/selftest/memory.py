"""Memory check: the peak memory accelbench reports for a training case must be at least what the
case provably holds at once: its parameters, their gradients and the optimiser's state.

The case is run through the runner (:func:`accelbench.engine.measure_case.run_case`), exactly as ``run`` does
inline; the floor is counted from the same workload's model and optimiser after one step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from accelbench.devices import Device
from accelbench.measure.loop.stop import StopRule
from accelbench.measure.trackers.memory import format_bytes
from accelbench.options import RunOptions
from accelbench.selftest.result import SKIP, CheckResult, verdict
from accelbench.workloads.catalogue import get_workload_class

GROUP = "memory"
WORKLOAD = "mnist"
BATCH = 16


def state_floor_bytes(workload_name: str, size: str) -> int:
    """Parameters + gradients + optimiser state of one training step of the workload, in bytes."""
    workload = get_workload_class(workload_name)(size)
    model = workload.build_model()
    optimizer = workload.make_optimizer(model)
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()  # optimisers create their state lazily, at the first step
    tensors = [*model.parameters(), *(p.grad for p in model.parameters() if p.grad is not None)]
    tensors += [value for state in optimizer.state.values() for value in state.values()
                if isinstance(value, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def check_peak_memory(device: Device, size: str = "published") -> CheckResult:
    from accelbench.engine.case import Case
    from accelbench.engine.measure_case import run_case

    floor = state_floor_bytes(WORKLOAD, size)
    options = RunOptions(workloads=(WORKLOAD,), device=device.name, size=size,
                         stop=StopRule("steps", 3), warmup_steps=1, batch_size=BATCH,
                         isolation="none")
    result = run_case(Case(workload=WORKLOAD, mode="train", device=device, batch_size=BATCH), options)
    name = f"a training case's peak memory >= parameters + gradients + optimiser state ({WORKLOAD})"
    if not result.ok:
        return CheckResult(GROUP, name, device.name, verdict(False),
                           f"the case did not run: {result.status}: {result.error}")
    peak = result.peak_memory_bytes
    if peak is None:
        return CheckResult(GROUP, name, device.name, SKIP,
                           f"no peak-memory figure on this device ({result.memory_source})")
    return CheckResult(GROUP, name, device.name, verdict(peak >= floor),
                       f"peak {format_bytes(peak)} ({result.memory_source}) vs at least "
                       f"{format_bytes(floor)} held", {"peak_bytes": peak, "floor_bytes": floor})


def memory_checks(device: Device, quick: bool = False) -> list[Callable[[], CheckResult]]:
    return [lambda: check_peak_memory(device)]
