"""Numerical parity: train a candidate (device x precision x compile) and a CPU reference from
identical initial weights on identical batches with identical randomness, and compare.

Identical randomness: every ``nn.Dropout`` of both models is swapped for :class:`SeededDropout`
(attention-probability dropout, which fused attention kernels draw on the device, is switched
off on both sides),
which draws its mask on the CPU from a generator reset to the same seed at every step on both
sides, and models draw other noise (the VAE's reparameterisation) through a ``Noise`` module,
which parity points at the same per-step CPU generator. So the two sides differ only in
arithmetic.

The noise floor: many trainings amplify rounding (a chaotic trajectory: MNIST's Adadelta at lr 1.0
on synthetic batches takes a 1e-8 difference to 1e-1 in 30 steps), so after some step even a
correct fp32 device sits beyond any fixed tolerance of the fp64 reference, and later steps cannot
tell a device's error from rounding. When a candidate would be ``diverged`` over every step,
noise-floor runs measure where that step is: the reference itself (same device and precision, so
a fault of the candidate's arithmetic cannot hide in the floor), its parameters perturbed after
every step by a relative rounding of the candidate precision's size (``FLOOR_SCALE`` x
``UNIT_ROUNDOFF``), from the same weights on the same batches, ``FLOOR_RUNS`` times with
different noise. The candidate is judged over the steps before the earliest of them first
leaves the ``pass`` tolerance (``judged_steps``); the steps after are reported, not judged, so a
correct device is not failed for the training's own sensitivity to rounding. Elsewhere every step
is judged (the floor could only loosen a verdict that already passes, so it is not run).

Verdicts, from the per-step relative loss difference |candidate - reference| / max(|reference|, 1e-8)
over the judged steps, and the relative difference of the trained models' outputs on a held batch
(judged only when every step is):
  pass         every judged step and the output within the precision's ``pass`` tolerance
  drift        within the looser ``drift`` tolerance (expected accumulation of rounding)
  diverged     beyond ``drift``; the first step that left it is named
  non-finite   the candidate produced NaN/Inf (at any step); the first step and the tensor are named
  inconclusive rounding of this precision leaves the tolerance from step 1: no step can be judged
  failed       the candidate raised; the error text is kept
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any

import torch
from torch import nn

from accelbench.data.options import DataOptions
from accelbench.devices import Device
from accelbench.devices.numerics import Precision, get_precision, precision_settings, prepare_model
from accelbench.devices.precisions import TOLERANCES, UNIT_ROUNDOFF, Tolerance
from accelbench.engine.steps import make_eval_step, make_train_step
from accelbench.measure.compiled import compile_module
from accelbench.measure.loop.step_loop import BatchStream
from accelbench.results import PARITY_VERDICTS
from accelbench.workloads.base import Batch, Noise, Workload

VERDICTS = PARITY_VERDICTS
FP64 = Precision("fp64", param_dtype=torch.float64)


def reference_precision(reference: str) -> Precision:
    """The CPU reference's precision for ``--reference``: cpu-fp64 is float64, cpu float32.
    The one reading of the flag, for the training check and the generation check alike."""
    return FP64 if reference == "cpu-fp64" else get_precision("fp32")


#: The noise floor's perturbation is this many unit roundoffs a step (a step's many operations
#: each round; a dot product's error grows with its length) ...
FLOOR_SCALE = 4.0
#: ... and it is the earliest departure of this many runs with different noise: one run can miss
#: a knife-edge event (a ReLU or max-pool choice that flips) that the candidate's rounding hits.
FLOOR_RUNS = 2


class ParityRandom:
    """A CPU generator both sides reset to the same seed before each step."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)

    def reset(self, step: int) -> None:
        self.generator.manual_seed(self.seed * 1_000_003 + step)


class SeededDropout(nn.Module):
    def __init__(self, p: float, random: ParityRandom) -> None:
        super().__init__()
        self.p = p
        self.random = random

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        keep = torch.rand(x.shape, generator=self.random.generator) >= self.p
        return x * keep.to(device=x.device, dtype=x.dtype) / (1 - self.p)


def _is_attention(module: nn.Module) -> bool:
    return isinstance(module, nn.MultiheadAttention) or type(module).__name__.endswith("Attention")


def _disable_attention_dropout(module: nn.Module) -> None:
    """Attention-probability dropout runs inside fused kernels (scaled_dot_product_attention,
    multi_head_attention_forward) that draw their own random numbers on the device, so it cannot
    be made identical: it is switched off on both sides instead (they still match each other)."""
    if isinstance(getattr(module, "dropout", None), float):
        module.dropout = 0.0  # type: ignore[assignment]  # nn.MultiheadAttention's is a float
    elif isinstance(getattr(module, "dropout", None), nn.Dropout):
        module.dropout = nn.Dropout(0.0)  # HF attention reads self.dropout.p for its kernel


def seed_randomness(model: nn.Module, random: ParityRandom) -> nn.Module:
    """Dropouts become SeededDropout (attention dropout is switched off, see above); every Noise
    module draws from the shared generator."""
    if _is_attention(model):
        _disable_attention_dropout(model)
    for name, child in model.named_children():
        if _is_attention(child):
            _disable_attention_dropout(child)
            seed_randomness(child, random)
        elif isinstance(child, nn.Dropout) and child.p > 0:
            setattr(model, name, SeededDropout(child.p, random))
        elif isinstance(child, Noise):
            child.generator = random.generator
        else:
            seed_randomness(child, random)
    return model


@dataclass
class Side:
    """One side of the comparison: its model, step and randomness."""

    workload: Workload
    model: nn.Module
    device: Device
    precision: Precision
    random: ParityRandom


def _relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-8)


def _first_nonfinite_tensor(model: nn.Module) -> str:
    for name, param in model.named_parameters():
        if not torch.isfinite(param).all():
            return f"parameter {name}"
        if param.grad is not None and not torch.isfinite(param.grad).all():
            return f"gradient of {name}"
    return "loss"


def _output_difference(candidate: torch.Tensor, reference: torch.Tensor) -> float:
    # To the CPU first, then to float64: MPS has no float64 and refuses the conversion there.
    c, r = candidate.detach().cpu().double(), reference.detach().cpu().double()
    return float((c - r).norm() / max(float(r.norm()), 1e-12))


def _parameter_difference(candidate: nn.Module, reference: nn.Module) -> float:
    worst = 0.0
    ref_params = dict(reference.named_parameters())
    for name, param in candidate.named_parameters():
        name = name.removeprefix("_orig_mod.")
        if name in ref_params:
            worst = max(worst, _output_difference(param, ref_params[name]))
    return worst


def _leaves(value: float, reference: float, tolerance: Tolerance) -> bool:
    """A noise-floor loss has left the reference: beyond the ``pass`` tolerance, or not finite."""
    return not math.isfinite(value) or _relative(value, reference) > tolerance.passed


def judged_horizon(floor: list[float], reference: list[float], tolerance: Tolerance) -> int:
    """How many leading steps can be judged: those before the noise-floor run first leaves the
    ``pass`` tolerance of the reference (or stops being finite)."""
    for step, (value, ref) in enumerate(zip(floor, reference, strict=False), start=1):
        if _leaves(value, ref, tolerance):
            return step - 1
    return min(len(floor), len(reference))


def compare_curves(candidate: list[float], reference: list[float], output_diff: float | None,
                   tolerance: Tolerance, judged: int | None = None) -> dict[str, Any]:
    """The verdict from two loss curves (and the trained outputs' difference), judging the first
    ``judged`` steps (all when None); the output counts only when every step is judged."""
    for step, value in enumerate(candidate, start=1):
        if not math.isfinite(value):
            return {"verdict": "non-finite", "first_bad_step": step}
    judged = len(candidate) if judged is None else min(judged, len(candidate))
    if judged == 0 and candidate:
        return {"verdict": "inconclusive", "first_bad_step": None, "max_rel_loss_diff": None}
    diffs = [_relative(c, r) for c, r in zip(candidate[:judged], reference[:judged], strict=True)]
    worst = max(diffs, default=0.0)
    first_beyond = next((i for i, d in enumerate(diffs, start=1) if d > tolerance.drift), None)
    summary: dict[str, Any] = {"max_rel_loss_diff": worst}
    if first_beyond is not None:
        return {**summary, "verdict": "diverged", "first_bad_step": first_beyond}
    if judged < len(candidate):
        output_diff = None  # the trained outputs lie past the judged steps
    if output_diff is not None and output_diff > tolerance.drift:
        return {**summary, "verdict": "diverged", "first_bad_step": len(candidate)}
    passed = worst <= tolerance.passed and (output_diff is None or output_diff <= tolerance.passed)
    return {**summary, "verdict": "pass" if passed else "drift", "first_bad_step": None}


@dataclass
class Prepared:
    side: Side
    runnable: nn.Module
    channels_last: bool


def _prepare(workload_cls: type[Workload], size: str, initial: nn.Module, device: Device,
             precision: Precision, compile_backend: str, channels_last: bool, seed: int) -> Prepared:
    random = ParityRandom(seed)
    workload = workload_cls(size)
    model = seed_randomness(copy.deepcopy(initial), random)
    model = prepare_model(model, precision, channels_last).to(device.torch_device)
    runnable = compile_module(model, compile_backend)
    return Prepared(Side(workload, model, device, precision, random), runnable, channels_last)


class RoundingNoise:
    """After every step, each parameter element is multiplied by 1 + u * U(-1, 1): a rounding of
    relative size ``u`` (a precision's unit roundoff), drawn from its own seeded CPU generator."""

    def __init__(self, unit: float, seed: int) -> None:
        self.unit = unit
        self.generator = torch.Generator().manual_seed(seed * 7919 + 17)

    @torch.no_grad()
    def __call__(self, model: nn.Module) -> None:
        for param in model.parameters():
            if param.is_floating_point():
                noise = torch.rand(param.shape, generator=self.generator, dtype=torch.float64)
                param.mul_((1 + self.unit * (2 * noise - 1)).to(param.device, param.dtype))


#: Called with (step, loss) after each step: True stops the training there.
StopWhen = Callable[[int, float], bool]


def _train(prepared: Prepared, batches: list[Batch], skip: frozenset[int] = frozenset(),
           noise: RoundingNoise | None = None, stop: StopWhen | None = None
           ) -> tuple[list[float], list[int]]:
    with precision_settings(prepared.side.precision, prepared.side.device):  # tf32 as in ``run``
        return _train_steps(prepared, batches, skip, noise, stop)


@dataclass
class NoiseFloor:
    """Where the reference, re-run with a rounding of size ``unit`` every step, first leaves the
    ``pass`` tolerance of its unperturbed curve: the earliest of ``FLOOR_RUNS`` runs. A run stops
    at its departure, and a later run goes no further than the earliest so far (only the earliest
    counts), so a training that amplifies rounding early costs little."""

    reference: list[float]
    tolerance: Tolerance
    unit: float

    def departs(self, step: int, loss: float) -> bool:
        return step > len(self.reference) or _leaves(loss, self.reference[step - 1], self.tolerance)

    def measure(self, prepare: Callable[[], Prepared], batches: list[Batch], skip: frozenset[int],
                seed: int) -> tuple[int, list[float]]:
        """(judged steps, the curve of the run that set them, NaN-padded to ``batches``)."""
        judged, curve = len(batches), None
        for run in range(FLOOR_RUNS):
            losses, _ = _train(prepare(), batches[: judged + 1], skip,
                               RoundingNoise(self.unit, seed * FLOOR_RUNS + run), self.departs)
            horizon = min(judged_horizon(losses, self.reference, self.tolerance), judged)
            if curve is None or horizon < judged:
                judged, curve = horizon, losses
        assert curve is not None
        return judged, curve + [math.nan] * (len(batches) - len(curve))


def _train_steps(prepared: Prepared, batches: list[Batch], skip: frozenset[int],
                 noise: RoundingNoise | None, stop: StopWhen | None
                 ) -> tuple[list[float], list[int]]:
    side = prepared.side
    step_fn = make_train_step(side.workload, prepared.runnable, side.workload.make_optimizer(side.model),
                              side.device, side.precision, prepared.channels_last, track_skipped=True)
    losses = []
    for step, batch in enumerate(batches, start=1):
        side.random.reset(step)
        loss = float(step_fn(batch, update=step not in skip))
        losses.append(loss)
        if not math.isfinite(loss) or (stop is not None and stop(step, loss)):
            break
        if noise is not None:
            noise(side.model)
    return losses, step_fn.skipped


def _held_out_output(prepared: Prepared, batch: Batch) -> Any:
    prepared.side.random.reset(0)
    side = prepared.side
    with precision_settings(side.precision, side.device):
        return make_eval_step(side.workload, prepared.runnable, side.device, side.precision,
                              prepared.channels_last)(batch)


def run_parity(workload_cls: type[Workload], size: str, candidate_device: Device, precision: str,
               compile_backend: str, channels_last: bool, reference: str, reference_device: Device,
               steps: int, batch_size: int, seed: int = 0) -> dict[str, Any]:
    """Train both sides ``steps`` steps; return the parity record (curves, verdict, figures).

    The candidate trains first. Steps whose update its gradient scaler skipped (fp16 autocast)
    are replayed as skipped on the reference, so both sides apply the same updates.
    """
    candidate_precision = get_precision(precision)
    ref_precision = reference_precision(reference)
    torch.manual_seed(seed)
    initial = workload_cls(size).build_model()
    data = workload_cls(size).make_batches("train", batch_size, DataOptions(seed=seed))
    batches = list(islice(iter(BatchStream(data).next, None), steps + 1))
    held_out = batches.pop()
    candidate = _prepare(workload_cls, size, initial, candidate_device, candidate_precision,
                         compile_backend, channels_last, seed)
    candidate_curve, skipped = _train(candidate, batches)
    ref = _prepare(workload_cls, size, initial, reference_device, ref_precision, "", False, seed)
    reference_curve, _ = _train(ref, batches[: len(candidate_curve)], frozenset(skipped))
    tolerance = TOLERANCES[precision]
    record: dict[str, Any] = {
        "steps": list(range(1, len(candidate_curve) + 1)),
        "reference": reference_curve,
        "candidate": candidate_curve,
        "judged_steps": len(candidate_curve),
        "reference_kind": reference,
        "skipped_steps": skipped,
        "tolerance": {"pass": tolerance.passed, "drift": tolerance.drift},
    }
    if not all(math.isfinite(v) for v in candidate_curve):
        return {**record, "verdict": "non-finite", "first_bad_step": len(candidate_curve),
                "bad_tensor": _first_nonfinite_tensor(candidate.side.model)}
    outputs = [_held_out_output(p, held_out) for p in (candidate, ref)]
    output_diff = (_output_difference(outputs[0], outputs[1])
                   if isinstance(outputs[0], torch.Tensor) else None)
    verdict = compare_curves(candidate_curve, reference_curve, output_diff, tolerance)
    if verdict["verdict"] == "diverged":
        # Only here can the noise floor change the outcome: measure it, judge the steps before it.
        floor = NoiseFloor(reference_curve, tolerance, FLOOR_SCALE * UNIT_ROUNDOFF[precision])
        judged, record["noise_floor"] = floor.measure(
            lambda: _prepare(workload_cls, size, initial, reference_device, ref_precision, "",
                             False, seed), batches[: len(candidate_curve)], frozenset(skipped), seed)
        record["judged_steps"] = judged
        verdict = compare_curves(candidate_curve, reference_curve, output_diff, tolerance, judged)
    record.update(verdict)
    record["output_rel_diff"] = output_diff
    record["param_rel_diff"] = _parameter_difference(candidate.side.model, ref.side.model)
    return record
