"""``check --mode generate``: does the candidate (device x precision) generate the tokens the CPU
reference does?

The same weights (one model built on the CPU from a seed, copied to each side) and the same prompt
are decoded greedily on both sides: the reference on the CPU in float64 (``--reference cpu-fp64``,
the default) or float32 (``--reference cpu``), the candidate on its device at its precision,
compiled where the case says so (through the model's forward, which the workload's prefill and
decode_step call: a compiled module's other methods would run uncompiled). Both sides keep every
step's logits. Up to the first position where the greedy tokens differ, both sides saw the same
tokens, so their logits are comparable there (that position included: its logits came from the
same inputs, and its argmax is what differs); after it, the sequences differ and nothing more is
compared.

The logit difference at a position is max over the vocabulary |candidate - reference|, relative to
the largest |reference logit| there (scale-free: logits of random and trained models differ in
size). Verdicts, per sequence, the worst one reported:

  pass        the same tokens, and every compared logit difference within the precision's ``pass``
              tolerance (``parity.core.TOLERANCES``, as the training check uses)
  drift       the tokens first differ where the reference's best logit and its logit of the
              candidate's token are within the ``pass`` tolerance of that position's scale (a near
              tie that the precision's rounding can flip), or the logits differ by more than ``pass``
              but within ``drift``
  diverged    the tokens differ where the reference had a clear winner, or a logit difference
              beyond ``drift``, or (a quantized precision) the kernel's product leaves the
              product of its own dequantised weights (parity/quantized.py)
  non-finite  the candidate's logits hold NaN or Inf at a compared position
  failed      the candidate raised (the error text is kept)
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

import torch
from torch import nn

from accelbench.devices import Device
from accelbench.devices.compilation import INDUCTOR, CompileSpec
from accelbench.devices.precisions import precision_spec
from accelbench.errors import UsageError
from accelbench.measure.generation.quantize import quantize_weights
from accelbench.measure.generation.recipe import prepare_generation
from accelbench.measure.generation.rounds import GenerationWorkload, check_lengths
from accelbench.options.check import REFERENCES
from accelbench.parity.core import TOLERANCES, Tolerance, reference_precision
from accelbench.parity.greedy import SCALE_FLOOR, greedy_with_logits
from accelbench.results.generation import TokenParity

ORDER = ("pass", "drift", "diverged", "non-finite", "failed")


class PrecisionLike(Protocol):
    """What the check needs of a precision (``Precision`` from the precision table), read only."""

    @property
    def name(self) -> str: ...

    @property
    def param_dtype(self) -> torch.dtype: ...

    @property
    def autocast_dtype(self) -> torch.dtype | None: ...


def parity_verdict(verdict: str, *, tolerance: Tolerance, **facts: Any) -> TokenParity:
    """The verdict as the result keeps it (``tolerance`` as its "pass" and "drift" bounds), its
    words written from its facts (:func:`worded`)."""
    return worded(TokenParity(verdict, tolerance={"pass": tolerance.passed, "drift": tolerance.drift},
                              **facts))


def worded(parity: TokenParity) -> TokenParity:
    """``parity`` with its words written from its facts: the verdict's (``verdict_message``), and
    after them a quantized candidate's quality (``message``)."""
    verdict = _verdict_words(parity)
    text = verdict
    if parity.quality:
        from accelbench.parity.quantized import describe_quality

        text += f"; {describe_quality(parity.quality)}"
    return replace(parity, message=text, verdict_message=verdict)


def _verdict_words(parity: TokenParity) -> str:
    if parity.verdict == "failed":
        return f"failed: {parity.error}"
    worst = f"largest logit difference {parity.max_logit_diff:.2e}"
    if parity.max_logit_diff_position is not None:
        worst += f" (position {parity.max_logit_diff_position})"
    if parity.candidate_token is None:
        where = f" at position {parity.position}" if parity.position is not None else ""
        return f"{parity.verdict}: the same {parity.new_tokens} tokens{where}; {worst}"
    tie = "a near tie" if parity.verdict == "drift" else "not a tie"
    return (f"{parity.verdict}: tokens first differ at position {parity.position} of sequence "
            f"{parity.sequence} (reference {parity.reference_token}, candidate {parity.candidate_token}; "
            f"reference gap {parity.reference_gap:.2e} vs tie tolerance {parity.tie_tolerance:.2e}: "
            f"{tie}); before it {worst}")


def tolerance_for(precision: str) -> Tolerance:
    if precision not in TOLERANCES:
        raise UsageError(f"no generation tolerance for precision {precision!r}; allowed: "
                         f"{', '.join(TOLERANCES)}")
    return TOLERANCES[precision]


def _worst(a: str, b: str) -> str:
    return max(a, b, key=ORDER.index)


def judge_generation(reference_tokens: torch.Tensor, reference_logits: torch.Tensor,
                     candidate_tokens: torch.Tensor, candidate_logits: torch.Tensor,
                     precision: str, tolerance: Tolerance | None = None,
                     reference_kind: str = "cpu-fp64") -> TokenParity:
    """The verdict from both sides' greedy tokens (B, N) and logits (B, N, vocab), on the CPU;
    ``reference_kind`` names what the reference side was (``--reference``, kept in the verdict)."""
    tolerance = tolerance or tolerance_for(precision)
    if reference_tokens.shape != candidate_tokens.shape or reference_logits.shape != candidate_logits.shape:
        raise ValueError(f"the two sides differ in shape: tokens {tuple(reference_tokens.shape)} vs "
                         f"{tuple(candidate_tokens.shape)}, logits {tuple(reference_logits.shape)} vs "
                         f"{tuple(candidate_logits.shape)}")
    reference = reference_logits.double()
    candidate = candidate_logits.double()
    batch, new_tokens = reference_tokens.shape
    differs = reference_tokens != candidate_tokens
    # Per sequence, the positions compared: up to and including its first differing token.
    first = torch.where(differs.any(dim=1), differs.int().argmax(dim=1), torch.full((batch,), new_tokens))
    compared = torch.arange(new_tokens).view(1, -1) <= first.view(-1, 1)
    scale = reference.abs().amax(dim=-1).clamp_min(SCALE_FLOOR)
    finite = torch.isfinite(candidate).all(dim=-1)
    relative = ((candidate - reference).abs().amax(dim=-1) / scale).where(finite, torch.inf)
    relative = relative.where(compared, 0.0)
    parity = functools.partial(parity_verdict, precision=precision, tolerance=tolerance,
                               new_tokens=new_tokens, reference=reference_kind)

    bad = ~finite & compared
    if bad.any():
        sequence, position = (int(i) for i in bad.nonzero()[bad.nonzero()[:, 1].argmin()])
        return parity("non-finite", position=position, sequence=sequence)
    flat = int(relative.argmax())
    worst_diff, worst_at = float(relative.flatten()[flat]), flat % new_tokens
    parity = functools.partial(parity, max_logit_diff=worst_diff, max_logit_diff_position=worst_at)
    logits_verdict = ("pass" if worst_diff <= tolerance.passed
                      else "drift" if worst_diff <= tolerance.drift else "diverged")

    if not differs.any():
        left_drift: int | None = None
        if logits_verdict == "diverged":  # name where the logits first left the drift tolerance
            beyond = (relative > tolerance.drift).nonzero()
            left_drift = int(beyond[beyond[:, 1].argmin(), 1])
        return parity(logits_verdict, position=left_drift)
    sequences = [b for b in range(batch) if first[b] < new_tokens]
    verdicts = {}
    for b in sequences:
        p = int(first[b])
        ref_token, cand_token = int(reference_tokens[b, p]), int(candidate_tokens[b, p])
        gap = float(reference[b, p, ref_token] - reference[b, p, cand_token])
        tie = tolerance.passed * float(scale[b, p])
        verdicts[b] = (_worst("drift" if gap <= tie else "diverged", logits_verdict),
                       p, ref_token, cand_token, gap, tie)
    # Report the worst sequence; among equals, the earliest difference.
    chosen = min(sequences, key=lambda b: (-ORDER.index(verdicts[b][0]), verdicts[b][1], b))
    verdict, position, ref_token, cand_token, gap, tie = verdicts[chosen]
    return parity(verdict, position=position, sequence=chosen, reference_token=ref_token,
                  candidate_token=cand_token, reference_gap=gap, tie_tolerance=tie)


# --- running both sides ---------------------------------------------------------------------------
def relative_margins(logits: torch.Tensor) -> torch.Tensor:
    """Each position's best logit minus its second best, relative to its largest |logit| (B, N
    from logits B, N, vocab): the gap a rounding must close to flip the greedy token, on the same
    scale ``judge_generation`` calls a near tie (a lower bound of its gap to any other token)."""
    top = logits.double().topk(2, dim=-1).values
    return (top[..., 0] - top[..., 1]) / logits.double().abs().amax(dim=-1).clamp_min(SCALE_FLOOR)


def reference_tokens(workload: GenerationWorkload, build_model: Callable[[], nn.Module], *,
                     batch_size: int, prompt_len: int, new_tokens: int, seed: int = 0,
                     dtype: torch.dtype = torch.float64) -> tuple[list[list[int]], list[list[float]]]:
    """The greedy tokens (B x N) of the CPU reference in ``dtype`` and its relative margin at each
    of them (``relative_margins``), from the model built as a run builds it
    (``torch.manual_seed(seed)`` then ``build_model()``) and the run's prompt: what
    reference/expected_tokens.json ships (scripts/expected_tokens.py)."""
    check_lengths(workload, batch_size, prompt_len, new_tokens)
    torch.manual_seed(seed)
    model = build_model().to(dtype=dtype).eval()
    prompt = workload.make_prompt(batch_size, prompt_len, seed)
    tokens, logits = greedy_with_logits(workload, model, prompt, new_tokens)
    return tokens.tolist(), relative_margins(logits).tolist()


def both_sides(model: nn.Module, device: Device, precision: PrecisionLike,
               reference_dtype: torch.dtype = torch.float64) -> tuple[nn.Module, nn.Module]:
    """(the CPU reference in ``reference_dtype``, the candidate on ``device`` at ``precision``),
    both copies of ``model`` (built once on the CPU), in eval mode (no dropout on either side)."""
    reference = copy.deepcopy(model).to(dtype=reference_dtype).eval()
    candidate = copy.deepcopy(model).to(device=device.torch_device, dtype=precision.param_dtype).eval()
    return reference, candidate


def run_generation_check(workload: GenerationWorkload, build_model: Callable[[], nn.Module], device: Device,
                         precision: PrecisionLike, *, batch_size: int = 1, prompt_len: int,
                         new_tokens: int, seed: int = 0, reference: str = "cpu-fp64",
                         compile_backend: str = "",
                         plant: Callable[[nn.Module], None] | None = None) -> TokenParity:
    """Build the model once on the CPU (seeded), decode the same prompt on both sides, judge.
    ``reference`` is ``--reference`` (cpu-fp64 or cpu); ``compile_backend`` compiles the
    candidate ("" leaves it eager; a workload whose generation never calls the compiled model
    fails). ``plant`` alters the candidate after the copy (a planted fault, for tests and
    selftest). The precision's torch switches (TF32 and the like) are the caller's."""
    check_lengths(workload, batch_size, prompt_len, new_tokens)
    if reference not in REFERENCES:
        raise UsageError(f"--reference {reference!r} is unknown; allowed: {', '.join(REFERENCES)}")
    tolerance = tolerance_for(precision.name)
    torch.manual_seed(seed)
    ref_model, candidate = both_sides(build_model(), device, precision,
                                      reference_precision(reference).param_dtype)
    prompt = workload.make_prompt(batch_size, prompt_len, seed)
    ref_tokens, ref_logits = greedy_with_logits(workload, ref_model, prompt, new_tokens)
    unquantized, quality = None, None
    try:
        with device.current(), _autocast(device, precision):
            if precision_spec(precision.name).quantized:
                # The bf16 path is the same weights before packing, on the same device.
                unquantized, candidate = candidate, copy.deepcopy(candidate)
                quantize_weights(candidate, precision.name, device,
                                 fused=CompileSpec.parse(compile_backend).backend == INDUCTOR)
            if plant is not None:
                plant(candidate)
            # The run's execution recipe (a graph mode: kept cache, fullgraph decode step).
            runner = prepare_generation(candidate, compile_backend, device, workload,
                                        str(getattr(workload, "name", type(workload).__name__)))
            on_device = prompt.to(device.torch_device)
            with runner.settings():
                cand_tokens, cand_logits = greedy_with_logits(workload, runner.prefill, on_device,
                                                              new_tokens, runner.decode)
            runner.confirm()
            if unquantized is not None:
                from accelbench.parity.quantized import quantization_quality

                quality = quantization_quality(workload, candidate, unquantized, on_device,
                                               cand_tokens, ref_tokens, ref_logits, reference)
    except Exception as error:  # a failure is a verdict with its text, not a crash
        text = f"{type(error).__name__}: {error}".strip().splitlines()[0][:500]
        return parity_verdict("failed", precision=precision.name, tolerance=tolerance,
                              new_tokens=new_tokens, error=text, reference=reference)
    verdict = judge_generation(ref_tokens, ref_logits, cand_tokens, cand_logits, precision.name,
                               tolerance, reference)
    if quality is not None and (quality.get("kernel") or {}).get("verdict") == "differs":
        # A kernel that leaves its own dequantised weights is wrong whatever the tokens did.
        verdict = replace(verdict, verdict=_worst(verdict.verdict, "diverged"))
    return worded(replace(verdict, quality=quality))


def _autocast(device: Device, precision: PrecisionLike) -> Any:
    import contextlib

    if precision.autocast_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device.torch_device).type, dtype=precision.autocast_dtype)
