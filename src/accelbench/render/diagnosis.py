"""Why a case runs as fast as it does: one diagnosis word per profiled case, with its figures.

A pure function of a stored result (``profile`` from ``--profile``, ``flops`` from every run,
the loop's input wait), so a report drawn from an old result file says the same
as the run did. The rules, first match wins:

1. **input-bound**: waiting for batches took more than ``INPUT_BOUND_FRACTION`` of the measured
   time: the loader, not the device, sets the pace. Only where the input wait is the device's
   idle time (the CPU, timing events): where it is the host's fetch time on an asynchronous
   device (MPS), it is an upper bound (the device may have been busy meanwhile), which alone
   calls nothing; the next rule that matches gives the word, and its line says the bound.
2. **launch-bound**: the device was busy less than ``IDLE_BUSY_FRACTION`` of the step: it sits
   idle between kernels because the host cannot issue them fast enough (many short kernels; the
   launch-latency floor, kernels x latency, is shown when ``accelbench roofline`` measured it).
   The step is the case's own *measured* median step, not the profiled one: the profiler's host
   overhead (op instrumentation) slows the profiled steps, and a device that kept up with the
   measured steps can idle between profiled ones waiting for that slowed host. So the busy share
   judged is the device's busy time per profiled step over the measured step, or over the profiled
   step where that is the shorter (the profiler then added no visible time, and the busy time lies
   inside the profiled window): the profiler's overhead can raise the share back, never lower it.
   The profiled window's own share is kept beside it (``profiled_busy_fraction``).
3. **compute-bound**: achieved FLOP/s at least ``NEAR_CEILING`` of the measured matrix-product
   peak in the case's dtype.
4. **memory-bound**: estimated bytes moved per second at least ``NEAR_CEILING`` of the measured
   memory bandwidth. The estimate is a lower bound: every byte allocated in the step is written
   once and read once (2 x the profiler's allocated bytes), plus the parameters read once in
   evaluation, or five times in training (forward read, backward read, gradient write, optimiser
   read and write; optimiser state not counted).
5. **kernel-bound**: busy but below both ceilings: the kernels themselves are slow for their size
   (small tensors, elementwise and reduction ops); bigger batches or fusion (torch.compile) help.

When both ceilings are near, the nearer one wins. Without a profile there is no diagnosis.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.render.format import format_bytes_rate, format_rate, format_seconds
from accelbench.render.peak_marks import mark_words
from accelbench.results import INPUT_BOUND_FRACTION, CaseResult, Ceilings, Flops, ProfileFigures

IDLE_BUSY_FRACTION = 0.5
NEAR_CEILING = 0.5
#: Parameter bytes moved per step, per mode (see the module docstring).
PARAMETER_PASSES = {"train": 5, "eval": 1}


@dataclass(frozen=True)
class Diagnosis:
    word: str
    #: One line with the figures that support the word.
    line: str
    figures: dict[str, Any] = field(default_factory=dict)
    #: (name, seconds per step) with the most device time, largest first.
    top_ops: list[tuple[str, float]] = field(default_factory=list)

    def top_ops_text(self, count: int) -> str:
        return "; ".join(f"{name} {format_seconds(seconds)}" for name, seconds in self.top_ops[:count])


def bytes_moved_per_step(profile: ProfileFigures, mode: str) -> float | None:
    if profile.allocated_bytes_per_step is None:
        return None
    return (2 * profile.allocated_bytes_per_step
            + PARAMETER_PASSES.get(mode, 1) * profile.parameter_bytes)


def busy_share(case: CaseResult, profile: ProfileFigures) -> float | None:
    """The device's busy time per step over the case's measured median step, or over the profiled
    step where that is shorter: the share the diagnosis judges (see the module docstring). None
    when the device offers no profiler activity."""
    if profile.busy_fraction is None:
        return None
    summary = case.summary()
    if summary is None or not 0 < summary.median < profile.step_s:
        return profile.busy_fraction
    return min(profile.busy_fraction * profile.step_s / summary.median, 1.0)


def _figures(case: CaseResult, profile: ProfileFigures, ceilings: Ceilings) -> dict[str, Any]:
    flops = case.flops or Flops()
    summary = case.summary()
    step = summary.median if summary else profile.step_s
    moved = bytes_moved_per_step(profile, case.mode)
    bandwidth = ceilings.memory_bandwidth_bytes_per_s
    achieved_bw = moved / step if moved is not None and step > 0 else None
    latency = ceilings.launch_latency_s
    return {
        "input_fraction": case.input_fraction(),
        "input_wait_upper_bound": case.input_wait_is_upper_bound(),
        "busy_fraction": busy_share(case, profile),
        "profiled_busy_fraction": profile.busy_fraction,
        "measured_step_s": summary.median if summary else None,
        "profiled_step_s": profile.step_s,
        "kernels_per_step": profile.kernels_per_step,
        "median_kernel_s": profile.median_kernel_s,
        "achieved_flops": flops.achieved_flops,
        "peak_flops": flops.peak_flops,
        "flops_fraction": flops.fraction_of_peak,
        # what the peak was (capped, busy, re-checked on a busy machine): said with its share
        "peak_mark": mark_words(flops),
        "bytes_per_step": moved,
        "achieved_bytes_per_s": achieved_bw,
        "bandwidth_bytes_per_s": bandwidth,
        "bandwidth_fraction": achieved_bw / bandwidth if achieved_bw and bandwidth else None,
        "launch_floor_fraction": (profile.kernels_per_step * latency / step
                                  if latency is not None and step > 0 else None),
    }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f}%"


def _ceiling_text(f: dict[str, Any]) -> str:
    flops = (f"{_pct(f['flops_fraction'])} of the FLOP/s peak "
             f"({format_rate(f['achieved_flops'] / 1e9)} of {format_rate(f['peak_flops'] / 1e9)} GFLOP/s"
             + (f"; a {f['peak_mark']})" if f.get("peak_mark") else ")")
             if f["flops_fraction"] is not None else "FLOP/s peak n/a")
    if f["bandwidth_fraction"] is not None:
        memory = (f"{_pct(f['bandwidth_fraction'])} of the bandwidth (>= "
                  f"{format_bytes_rate(f['achieved_bytes_per_s'])} of "
                  f"{format_bytes_rate(f['bandwidth_bytes_per_s'])})")
    else:
        memory = "bandwidth ceiling not measured (accelbench roofline)"
    return f"{flops}; {memory}"


def diagnose(case: CaseResult) -> Diagnosis | None:
    """The diagnosis of a profiled case, or None when it was not profiled (or profiling failed)."""
    stored = case.profile
    if not case.ok or stored is None or stored.figures is None:
        return None
    profile = stored.figures
    f = _figures(case, profile, stored.ceilings or Ceilings())
    found = _rule(case, profile, f)
    return Diagnosis(found.word, found.line, f, profile.top_ops)


def _rule(case: CaseResult, profile: ProfileFigures, f: dict[str, Any]) -> Diagnosis:
    """The first rule that matches (see the module docstring), as word and line."""
    busy = f"device busy {_pct(f['busy_fraction'])} of the step"
    if f["measured_step_s"] is not None and f["profiled_busy_fraction"] is not None \
            and f["profiled_step_s"] > f["measured_step_s"] * 1.05:
        busy += (f" (measured {format_seconds(f['measured_step_s'])}; the profiler's overhead "
                 f"stretched it to {format_seconds(f['profiled_step_s'])}, "
                 f"{_pct(f['profiled_busy_fraction'])} busy)")
    if f["input_fraction"] is not None and f["input_fraction"] > INPUT_BOUND_FRACTION:
        if not f["input_wait_upper_bound"]:
            return Diagnosis("input-bound", f"waiting for input {_pct(f['input_fraction'])} of the "
                             f"measured time; {busy}", f)
        found = _device_rule(profile, f, busy)
        return replace(found, line=f"{found.line}; {input_bound_text(f['input_fraction'])}")
    return _device_rule(profile, f, busy)


def input_bound_text(fraction: float) -> str:
    """What an upper bound on the input wait says, where an exact one would say input-bound."""
    return (f"input wait ≤ {_pct(fraction)} of the measured time (host fetch time; the device may "
            "have been busy meanwhile)")


def _device_rule(profile: ProfileFigures, f: dict[str, Any], busy: str) -> Diagnosis:
    """Rules 2 to 5: what the device's own figures say."""
    kernels = (f"{f['kernels_per_step']:.0f} {'kernels' if profile.source == 'device' else 'ops'}"
               f"/step, median {format_seconds(f['median_kernel_s'])}")
    if f["busy_fraction"] is not None and f["busy_fraction"] < IDLE_BUSY_FRACTION:
        floor = (f"; launch floor {_pct(f['launch_floor_fraction'])} of the step"
                 if f["launch_floor_fraction"] is not None else "")
        return Diagnosis("launch-bound", f"{busy}, idle between {kernels}{floor}: the host "
                         "cannot feed it", f)
    near = [(f["flops_fraction"] or 0.0, "compute-bound"), (f["bandwidth_fraction"] or 0.0, "memory-bound")]
    fraction, word = max(near)
    if fraction >= NEAR_CEILING:
        return Diagnosis(word, f"{_ceiling_text(f)}; {busy}", f)
    if f["busy_fraction"] is None:
        return Diagnosis("unknown", f"this device offers no profiler activity (host: {kernels}); "
                         f"{_ceiling_text(f)}", f)
    return Diagnosis("kernel-bound", f"{busy} ({kernels}) but below both ceilings: "
                     f"{_ceiling_text(f)}", f)
