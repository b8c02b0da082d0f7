"""``--profile``: torch.profiler around a few extra steps after the measured region.

What is measured, and how
-------------------------
After the timed loop, ``PROFILE_STEPS`` more steps run under ``torch.profiler`` (CPU activity,
plus the device's own activity where torch offers one: ``ProfilerActivity.CUDA`` on CUDA/ROCm,
``ProfilerActivity.XPU`` on XPU; MPS has none). Each step is wrapped in a ``record_function``
mark, the device is synchronised once at the end (not per step: a per-step sync would idle the
device while the host queues the next step and make every case look launch-bound), and the trace
is exported as Chrome-trace JSON and analysed by :func:`analyse_trace`. Recorded traces (the tests'
CUDA fixtures) go through that same function, so the device path is tested without a GPU.

From the trace, per step:
- ``busy_fraction``: the share of the profiled window in which the device was executing
  (the union of kernel, memcpy and memset intervals; on the CPU, of aten op intervals, so the rest
  is Python and framework overhead between ops). None when the device offers no profiler activity.
- ``kernels_per_step`` and ``median_kernel_s``: device kernels (on the CPU: leaf aten ops, the
  ones that contain no other op, which is where the work happens).
- ``top_ops``: the names with the most device time (on the CPU: self time) per step.
- ``allocated_bytes_per_step``: bytes allocated on the device per step (profile_memory).

The profiler adds host overhead per op (CPU op instrumentation; ``profile_memory`` adds a record
per allocation and free), so profiled steps run slower than measured ones, and a device that was
never idle in the measured steps can sit idle between the profiled ones, waiting for the slowed
host. So: the measured step time stays the figure of record (``step_s`` here is the profiled one);
the diagnosis judges the device's busy time per step against the *measured* step, not the profiled
window (``render/diagnosis.py``); and allocations are taken in a separate pass, so the timed pass
carries no ``profile_memory`` overhead.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from accelbench.devices import Device
from accelbench.measure.trackers.profile_figures import Ceilings, Profile, ProfileFigures

PROFILE_STEPS = 5
STEP_MARK = "accelbench.step"
#: Chrome-trace categories of work executing on the device (Kineto's names, CUDA and XPU alike).
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
TOP_OPS = 5


def _union_length(intervals: Iterable[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def _short_kernel_name(name: str) -> str:
    """``void at::native::elementwise_kernel<128, 2, ...>(...)`` -> ``at::native::elementwise_kernel``."""
    name = name.removeprefix("void ")
    for stop in ("<", "("):
        name = name.split(stop, 1)[0]
    return name.strip() or "?"


def _complete(events: list[dict[str, Any]], category: str | tuple[str, ...]) -> list[dict[str, Any]]:
    categories = (category,) if isinstance(category, str) else category
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in categories
            and isinstance(e.get("ts"), int | float) and isinstance(e.get("dur"), int | float)]


def _cpu_op_times(ops: list[dict[str, Any]]) -> tuple[dict[str, float], list[float]]:
    """Self time per op name and the durations of leaf ops, from the ops' nesting on each thread."""
    self_time: dict[str, float] = defaultdict(float)
    leaves: list[float] = []
    by_thread: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for event in ops:
        by_thread[(event.get("pid"), event.get("tid"))].append(event)
    for thread_ops in by_thread.values():
        thread_ops.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict[str, Any]] = []  # open ops; each carries its children's total time
        children: dict[int, float] = {}
        for op in [*thread_ops, None]:
            while stack and (op is None or op["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]):
                done = stack.pop()
                inner = children.pop(id(done), None)
                self_time[done["name"]] += max(done["dur"] - (inner or 0.0), 0.0)
                if inner is None:
                    leaves.append(done["dur"])
            if op is not None:
                if stack:
                    children[id(stack[-1])] = children.get(id(stack[-1]), 0.0) + op["dur"]
                stack.append(op)
    return self_time, leaves


def analyse_trace(trace: dict[str, Any], steps: int, device_is_cpu: bool,
                  parameter_bytes: int = 0) -> ProfileFigures:
    """Per-step figures from a torch.profiler Chrome trace holding ``steps`` marked steps."""
    events = trace.get("traceEvents", [])
    start, end = _step_window(events)
    device = [e for e in _complete(events, DEVICE_CATEGORIES) if e["ts"] + e["dur"] > start]
    if device:
        end = max(end, max(e["ts"] + e["dur"] for e in device))
    window = max(end - start, 1e-9)
    in_window = lambda e: start <= e["ts"] < end  # noqa: E731
    figures = functools.partial(
        ProfileFigures, steps=steps, step_s=window / steps / 1e6, parameter_bytes=parameter_bytes,
        allocated_bytes_per_step=_allocated(events, in_window, device_is_cpu) / steps)
    if device:
        per_name: dict[str, float] = defaultdict(float)
        for e in device:
            per_name[_short_kernel_name(str(e.get("name", "?")))] += e["dur"]
        kernels = [e["dur"] for e in device if e.get("cat") == "kernel"]
        busy = _union_length((max(e["ts"], start), e["ts"] + e["dur"]) for e in device)
        return figures(source="device", busy_fraction=min(busy / window, 1.0),
                       kernels_per_step=len(kernels) / steps,
                       median_kernel_s=statistics.median(kernels) / 1e6 if kernels else None,
                       top_ops=_top(per_name, steps))
    ops = [e for e in _complete(events, "cpu_op") if in_window(e)]
    self_time, leaves = _cpu_op_times(ops)
    busy = _union_length((e["ts"], e["ts"] + e["dur"]) for e in ops) / window
    return figures(source="cpu" if device_is_cpu else "host-only",
                   busy_fraction=min(busy, 1.0) if device_is_cpu else None,
                   kernels_per_step=len(leaves) / steps,
                   median_kernel_s=statistics.median(leaves) / 1e6 if leaves else None,
                   top_ops=_top(self_time, steps))


def _step_window(events: list[dict[str, Any]]) -> tuple[float, float]:
    marks = [e for e in _complete(events, "user_annotation") if e.get("name") == STEP_MARK]
    if not marks:
        raise ValueError(f"the trace holds no {STEP_MARK!r} step marks")
    return min(e["ts"] for e in marks), max(e["ts"] + e["dur"] for e in marks)


def _allocated(events: list[dict[str, Any]], in_window: Callable[[dict[str, Any]], bool],
               device_is_cpu: bool) -> float:
    """Bytes allocated on the device (the CPU: host memory) in the window; frees are negative."""
    memory_device = (lambda kind: kind == 0) if device_is_cpu else (lambda kind: kind != 0)
    return sum(e["args"]["Bytes"] for e in events if e.get("name") == "[memory]"
               and isinstance(e.get("ts"), int | float) and in_window(e)
               and isinstance(e.get("args"), dict) and e["args"].get("Bytes", 0) > 0
               and memory_device(e["args"].get("Device Type", 0)))


def allocated_per_step(trace: dict[str, Any], steps: int, device_is_cpu: bool) -> float:
    """Bytes allocated per step in a ``profile_memory`` trace holding ``steps`` marked steps
    (between the first mark's start and the last one's end: the allocations the steps made)."""
    events = trace.get("traceEvents", [])
    start, end = _step_window(events)
    return _allocated(events, lambda e: start <= e["ts"] <= end, device_is_cpu) / steps


def _top(microseconds: dict[str, float], steps: int) -> list[tuple[str, float]]:
    ranked = sorted(microseconds.items(), key=lambda item: item[1], reverse=True)[:TOP_OPS]
    return [(name, total / steps / 1e6) for name, total in ranked]


def profiler_activities(device: Device) -> list[Any]:
    """CPU, plus the device's activity when torch names one after the device kind and supports it
    in this build (so no device-name branching: a kind without an activity gets host ops only)."""
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU]
    own = getattr(ProfilerActivity, device.kind.upper(), None)
    if not device.is_cpu and own is not None and own in torch.profiler.supported_activities():
        activities.append(own)
    return activities


def profiled_trace(step: Callable[[Any], Any], next_batch: Callable[[], Any], device: Device,
                   steps: int, memory: bool) -> dict[str, Any]:
    """The Chrome trace of ``steps`` marked steps under torch.profiler; with ``memory``, with
    ``profile_memory`` (a record per allocation and free)."""
    from torch.profiler import profile, record_function

    device.synchronize()
    with profile(activities=profiler_activities(device), profile_memory=memory) as prof:
        for _ in range(steps):
            with record_function(STEP_MARK):
                step(next_batch())
        device.synchronize()
    with tempfile.TemporaryDirectory(prefix="accelbench-profile-") as folder:
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text(encoding="utf-8"))


def profile_steps(step: Callable[[Any], Any], next_batch: Callable[[], Any], device: Device,
                  steps: int | None = None, parameter_bytes: int = 0) -> ProfileFigures:
    """Run ``steps`` (default ``PROFILE_STEPS``) more steps under torch.profiler and analyse the
    exported trace; then as many again with ``profile_memory`` for the allocations only, so its
    overhead is in no timed figure."""
    steps = steps or PROFILE_STEPS
    timed = analyse_trace(profiled_trace(step, next_batch, device, steps, memory=False), steps,
                          device.is_cpu, parameter_bytes)
    allocated = allocated_per_step(profiled_trace(step, next_batch, device, steps, memory=True),
                                   steps, device.is_cpu)
    return dataclasses.replace(timed, allocated_bytes_per_step=allocated)


def roofline_ceilings(device: Device) -> dict[str, Any]:
    """The device's bandwidth and launch-latency ceilings from ``accelbench roofline`` (cached per
    device), for the memory- and launch-bound rules; the error text when they cannot be had."""
    try:
        from accelbench.measure.ceilings.roofline import device_roofline

        roofline = device_roofline(device)
        return {"memory_bandwidth_bytes_per_s": roofline.memory_bandwidth_bytes_per_s,
                "launch_latency_s": roofline.launch_latency_s,
                "matmul_flops": dict(roofline.matmul_flops)}
    except Exception as error:  # the profile stands without the ceilings; say why they are missing
        return {"error": f"{type(error).__name__}: {error}"}


def profile_case(step: Callable[[Any], Any], next_batch: Callable[[], Any], device: Device,
                 model: torch.nn.Module) -> Profile:
    """What the runner stores in the case's ``profile``: the figures, the ceilings, or the error."""
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    try:
        figures = profile_steps(step, next_batch, device, parameter_bytes=parameter_bytes)
    except Exception as error:  # profiling is extra: the measured figures stand without it
        return Profile(error=f"{type(error).__name__}: {error}")
    return Profile(figures, Ceilings(**roofline_ceilings(device)))
