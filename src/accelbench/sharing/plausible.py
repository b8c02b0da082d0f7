"""Is a shared line physically possible on its own machine? Plausibility per machine, never a
global cap.

A line is **implausible** (kept, shown apart, left out of every band) when it beats its own
device's limits or contradicts itself. Each check reads the line's own figures (the catalogue's
names, ``results/catalogue.py``) against the ceilings the line carries (``limits``) or, where it
carries none, the device's published peak:

* decode bytes x tokens/s (bytes one decode step reads x one sequence's decode rate, which is
  the decode bandwidth) above the device's measured bandwidth, unless every byte fits in the
  last-level cache (``measure/generation/decode_bytes.judge_bandwidth``, the one judgement of that rule);
* achieved FLOP/s more than 10% above the measured peak (the peak is itself a measurement), or,
  without one, above the device's datasheet peak for the case's precision (``devices/datasheets.py``);
  a peak measured beside other work (``peak_busy``) reads low and is no ceiling: the datasheet's;
* achieved FLOP/s above the physical ceiling of its device class (``CLASS_CEILINGS``: no table
  of devices needed; a CPU's is per core, times the cores the line names), whatever it carries;
* a training or evaluation line whose rate contradicts its own step times: the catalogue defines
  samples/s as batch / the median step, so the two must agree (within ``CONSISTENCY``), every
  step time must be positive and the 10th-percentile step cannot be slower than the median;
* a generation line whose rates contradict its own TTFT and TPOT: the catalogue defines the
  decode rates as 1 / TPOT per sequence and B / TPOT over the batch and prefill as B x P / TTFT,
  so end-to-end time TTFT + (N - 1) x TPOT must be positive and every rate must agree with the
  times it is made of (within ``CONSISTENCY``: the line's figures are rounded to 6 digits); a
  90th/99th percentile below its median is impossible too;
* generated tokens whose hash does not match the reference hash the line names, or that the
  line itself says do not match (``tokens_hash``, issue 28), for a precision that must follow the
  fp64 reference token for token (fp32); any other precision's tokens only where they first
  leave the reference at a position whose shipped margin its rounding cannot flip (issue 33:
  honest bf16, int8 and int4 lines leave it at near ties).

What a large collection does with the whole of it (machines far above the others of their device
model) is ``compare/outliers.mark_outliers``'s job, not a line's.
"""

from __future__ import annotations

import functools
from typing import Any

from accelbench.devices.datasheets import vendor_figures
from accelbench.devices.precisions import TOLERANCES
from accelbench.reference.expected_tokens import TokenKey, explain, judge_difference, reference_margin
from accelbench.reference.expected_tokens import expected as expected_tokens
from accelbench.sharing.bundle import number

#: Achieved FLOP/s above the carried peak by more than this factor is impossible: the peak is
#: itself a measurement (a few percent of noise), so only a clear excess is called implausible.
FLOPS_TOLERANCE = 1.10
#: Rates and the times they are made of agree to this (the line's figures are rounded to 6
#: significant digits; the catalogue computes them from the same medians).
CONSISTENCY = 0.01

#: The datasheet rates (``devices/datasheets.py``) that bound a precision's products where a line
#: carries no measured peak: fp32 may run as TF32 where the line's flags allow it.
_DATASHEET_PRECISIONS = {"fp32": ("fp32", "tf32"), "tf32": ("tf32",), "bf16": ("bf16",),
                         "amp-bf16": ("bf16",), "fp16": ("fp16",), "amp-fp16": ("fp16",)}

#: Physical FLOP/s ceilings per device class (``compare/peers.DEVICE_CLASSES``), above any device of
#: the class sold by 2026, for lines of devices no table knows: (fp32 and fp64, any other precision).
#: A CPU's is per physical core: 64 fp32 FLOP a cycle (two 512-bit FMA units) at 6 GHz is 384
#: GFLOP/s, and Apple's matrix units or Intel's AMX reach about 2,048 bf16 FLOP a cycle at 4 GHz.
#: An accelerator's is per device: the fastest (B200, MI355X) run about 2.5 PFLOP/s dense bf16,
#: 5 fp8, 10 fp4 and under 0.2 PFLOP/s plain fp32; Apple's largest GPU about 30 TFLOP/s.
CPU_CORE_CEILINGS = (0.5e12, 10e12)
CLASS_CEILINGS: dict[str, tuple[float, float]] = {
    "cuda": (0.5e15, 20e15), "xpu": (0.5e15, 20e15), "other": (0.5e15, 20e15), "mps": (0.1e15, 0.1e15)}
#: Cores assumed for a CPU line that does not say (more than any socket pair sold by 2026), and the
#: most a line may claim (a forged core count cannot lift the ceiling without end).
CPU_CORES_UNSAID, CPU_CORES_MAX = 512, 2048
_WIDE_PRECISIONS = ("fp32", "fp64")



def _real(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _figure(figures: dict[str, Any], name: str) -> float | None:
    value = figures.get(name)
    return None if value is None else number(value, f"figures.{name}")


@functools.lru_cache(maxsize=1024)
def published_peak(model: str, precision: str) -> float | None:
    """The device's datasheet FLOP/s for ``precision`` (None: a chip or precision the table does not
    know). Cached: a collection names a few device models many times."""
    figures = vendor_figures(model)
    rates = [figures.matmul_flops[name] for name in _DATASHEET_PRECISIONS.get(precision, ())
             if figures is not None and name in figures.matmul_flops]
    return max(rates) if rates else None


def _bandwidth(limits: dict[str, Any], figures: dict[str, Any]) -> str:
    bandwidth = _real(limits.get("bandwidth_bytes_per_s"))
    read, per_sequence = _figure(figures, "bytes_per_token"), _figure(figures, "decode_tokens_per_s")
    # From the figures the rate is made of, so that an understated bandwidth figure cannot hide it.
    decode = (read * per_sequence if read and per_sequence
              else _figure(figures, "decode_bandwidth_bytes_per_s"))
    if not decode or not bandwidth or bandwidth <= 0 or decode <= bandwidth:
        return ""
    # Imported only for a line above its bandwidth: its module loads torch (seconds a large read
    # does not need).
    from accelbench.measure.generation.decode_bytes import judge_bandwidth

    cache = limits.get("last_level_cache_bytes")
    judged = judge_bandwidth(decode, bandwidth, int(read or 0),
                             cache if isinstance(cache, int) and not isinstance(cache, bool) else None)
    return (f"decode bandwidth {judged.share:.0%} of the device's measured bandwidth (and more than "
            "its cache holds)") if judged.flagged else ""


def class_ceiling(line: dict[str, Any]) -> float:
    """The physical FLOP/s ceiling of the line's device class for its precision (``CLASS_CEILINGS``)."""
    device, key, host = line.get("device") or {}, line.get("key") or {}, line.get("host") or {}
    wide = str(key.get("precision", "")) in _WIDE_PRECISIONS
    kind = str(device.get("kind", ""))
    if kind == "cpu":
        cores = _real(host.get("cores")) or CPU_CORES_UNSAID
        return CPU_CORE_CEILINGS[0 if wide else 1] * min(max(cores, 1.0), CPU_CORES_MAX)
    return CLASS_CEILINGS.get(kind, CLASS_CEILINGS["other"])[0 if wide else 1]


def _flops(line: dict[str, Any], limits: dict[str, Any], figures: dict[str, Any]) -> str:
    achieved = _figure(figures, "achieved_flops")
    if not achieved:
        return ""
    if achieved < 0:
        return "achieved FLOP/s that is negative"
    ceiling = class_ceiling(line)
    if achieved > ceiling:
        kind = str((line.get("device") or {}).get("kind", ""))
        return (f"achieved FLOP/s {achieved:.3g} above the physical ceiling of any {kind or 'such'} device "
                f"({ceiling:.3g}{' for its cores' if kind == 'cpu' else ''})")
    peak = None if limits.get("peak_busy") else _real(limits.get("peak_flops"))
    if peak and peak > 0:
        if achieved > peak * FLOPS_TOLERANCE:
            return f"{achieved / peak:.0%} of the device's measured peak FLOP/s"
        return ""
    device, key = line.get("device") or {}, line.get("key") or {}
    published = published_peak(str(device.get("model", "")), str(key.get("precision", "")))
    if published and achieved > published * FLOPS_TOLERANCE:
        return f"{achieved / published:.0%} of the device's published peak FLOP/s"
    return ""


def _disagree(stated: float | None, expected: float) -> bool:
    return stated is not None and abs(stated - expected) > CONSISTENCY * abs(expected)


def _steps(key: dict[str, Any], figures: dict[str, Any]) -> str:
    """A training or evaluation line's rate against the step times it is made of (every line of a
    collection is read here: plain lookups, a few microseconds)."""
    median, p10 = _real(figures.get("median_step_s")), _real(figures.get("p10_step_s"))
    mean = _real(figures.get("mean_step_s"))
    for name, value in (("median_step_s", median), ("p10_step_s", p10), ("mean_step_s", mean)):
        if value is not None and not value > 0:
            return f"a step time ({name}) that is not positive"
    batch = _real(key.get("batch_size"))
    if median and batch and _disagree(_real(figures.get("samples_per_s")), batch / median):
        return "samples/s is not batch / the median step time"
    if median and p10 is not None and p10 > median * (1 + CONSISTENCY):
        return "p10_step_s above median_step_s"
    return ""


def _generation(key: dict[str, Any], figures: dict[str, Any]) -> str:
    """The catalogue's definitions, held against each other."""
    ttft, tpot = _figure(figures, "ttft_s"), _figure(figures, "tpot_s")
    batch, prompt = _real(key.get("batch_size")) or 1.0, _real(key.get("prompt_len")) or 0.0
    if ttft is not None and ttft <= 0:
        return "a time to first token that is not positive"
    if tpot is not None and tpot <= 0:
        return "a time per output token that is not positive"
    if tpot:
        if _disagree(_figure(figures, "decode_tokens_per_s"), 1 / tpot):
            return "decode tokens/s per sequence is not 1 / TPOT"
        if _disagree(_figure(figures, "decode_tokens_per_s_total"), batch / tpot):
            return "decode tokens/s over the batch is not batch / TPOT"
    if ttft and prompt and _disagree(_figure(figures, "prefill_tokens_per_s"), batch * prompt / ttft):
        return "prefill tokens/s is not batch x prompt / TTFT"
    for median, tail in (("ttft_s", "ttft_p90_s"), ("ttft_p90_s", "ttft_p99_s"), ("tpot_s", "tpot_p99_s")):
        low, high = _figure(figures, median), _figure(figures, tail)
        if low is not None and high is not None and high < low * (1 - CONSISTENCY):
            return f"{tail} below {median}"
    return ""


def _tokens(line: dict[str, Any], key: dict[str, Any]) -> str:
    """Whether the line's generated tokens are the reference's. The reference accelbench ships
    (the fp64 CPU reference's tokens, reference/expected_tokens.json, for the weights' seed the
    line names) wins over the one the line names itself, which a forger controls; a line that
    names another reference than the shipped one is caught too. Tokens that differ are judged
    by the precision (``_differing_tokens``)."""
    stated = line.get("validity")
    validity: dict[str, Any] = stated if isinstance(stated, dict) else {}
    mine = line.get("tokens_hash", validity.get("tokens_hash"))
    said = validity.get("tokens_match") is False
    if not said and (not isinstance(mine, str) or not mine):
        return ""
    named = line.get("tokens_reference_hash", validity.get("tokens_reference_hash"))
    seed = validity.get("tokens_seed", 0)
    shipped = expected_tokens(TokenKey(
        str(key.get("workload")), int(key.get("workload_version") or 1), str(key.get("size")),
        seed if isinstance(seed, int) and not isinstance(seed, bool) else 0,
        int(key.get("batch_size") or 0), int(key.get("prompt_len") or 0), int(key.get("new_tokens") or 0)))
    if shipped is not None:
        if isinstance(named, str) and named and named != shipped["hash"]:
            return "names a reference hash that is not the one accelbench ships for this work"
        expected = shipped["hash"]
    else:
        expected = named if isinstance(named, str) and named else None
    if said or (expected and isinstance(mine, str) and mine and mine != expected):
        return _differing_tokens(validity, key, shipped, said)
    return ""


def _differing_tokens(validity: dict[str, Any], key: dict[str, Any], shipped: dict[str, Any] | None,
                      said: bool) -> str:
    """Tokens that leave the reference: evidence against the line only for a precision that must
    follow fp64, or where they leave it at a position the reference's margin says the
    precision's rounding cannot flip (``expected_tokens.judge_difference``). The margin is the one
    accelbench ships where it ships the reference (the line's own only where it does not)."""
    precision = str(key.get("precision", ""))
    position = validity.get("tokens_first_difference")
    new_tokens = _real(key.get("new_tokens"))
    if not (isinstance(position, int) and not isinstance(position, bool) and position >= 0
            and (not new_tokens or position < new_tokens)):
        position = None
    margin = (reference_margin(shipped, position) if shipped is not None
              else _real(validity.get("tokens_reference_margin")))
    tolerance = TOLERANCES.get(precision)
    tie = tolerance.passed if tolerance else None
    verdict = judge_difference(precision, position, margin, tie)
    if verdict == "must follow":
        return ("generated tokens do not match the reference (the line says so)" if said
                else "generated tokens do not match the reference hash") + \
            f" ({precision} must follow the fp64 reference token for token)"
    if verdict == "clear winner":
        return f"generated {explain(verdict, precision, position, margin, tie)}"
    return ""


def implausible(line: dict[str, Any]) -> str:
    """Why the line cannot be right on its own machine ("" when nothing says so)."""
    limits, figures, key = line.get("limits"), line.get("figures"), line.get("key")
    if not isinstance(figures, dict) or not isinstance(key, dict):
        return ""
    limits = limits if isinstance(limits, dict) else {}
    flops = _flops(line, limits, figures) if figures.get("achieved_flops") is not None else ""
    if key.get("mode") != "generate":  # the other checks read generation figures
        return flops or _steps(key, figures)
    return _bandwidth(limits, figures) or flops or _generation(key, figures) or _tokens(line, key)
