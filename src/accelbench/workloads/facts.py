"""What a workload's model is: parameters, FLOPs per sample, and torchvision's published figures.

FLOPs are counted, not estimated: ``torch.utils.flop_counter.FlopCounterMode`` records the
matrix products, convolutions and attention of one real step on a batch of ``COUNT_BATCH``.
One FLOP is one floating-point operation, so a multiply-add counts 2 (torchvision's "GFLOPS"
metadata counts multiply-adds, hence the separate label). The model is built on the ``meta``
device, where no memory is allocated and no arithmetic runs, so counting VGG-16 takes a fraction
of a second; a model that cannot run on ``meta`` is counted on the CPU instead.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torchvision
from torch.utils.flop_counter import FlopCounterMode

from accelbench.data.options import DataOptions
from accelbench.workloads.base import Workload, generates
from accelbench.workloads.catalogue import get_workload_class
from accelbench.workloads.facts_record import TORCHVISION_LABEL, ModelFacts, TorchvisionFigures

__all__ = ["COUNT_BATCH", "TORCHVISION_LABEL", "ModelFacts", "TorchvisionFigures", "clear_facts_cache",
           "count_flops", "flops_per_sample", "model_facts", "torchvision_figures"]

#: Training-mode batch norm needs more than one value per channel.
COUNT_BATCH = 2


def torchvision_figures(weights: str, note: str = "") -> TorchvisionFigures:
    """Read a weights enum's metadata (``"ResNet50_Weights.IMAGENET1K_V1"``); nothing is downloaded."""
    enum_name, member = weights.split(".", 1)
    meta = getattr(getattr(torchvision.models, enum_name), member).meta
    return TorchvisionFigures(weights=weights, parameters=int(meta["num_params"]),
                              gmacs=float(meta["_ops"]), metrics=dict(meta.get("_metrics", {})),
                              note=note)


def count_flops(workload: Workload, mode: str, device: str = "meta") -> tuple[float, int]:
    """(FLOPs per sample of one ``mode`` step, parameter count as the workload counts them) with
    the model on ``device``."""
    with torch.device(device):
        model = workload.build_model()
    parameters = workload.count_parameters(model)
    batch = next(iter(workload.make_batches(mode, COUNT_BATCH, DataOptions())))
    batch = tuple(t.to(device) for t in batch)
    with FlopCounterMode(display=False) as counter:
        if mode == "train":
            # The optimiser's update is elementwise (no counted FLOPs), so forward + backward is it.
            model.train()
            workload.training_loss(model, batch).backward()
        else:
            model.eval()
            with torch.no_grad():
                workload.eval_step(model, batch)
    return counter.get_total_flops() / COUNT_BATCH, parameters


def _count_anywhere(workload: Workload, mode: str) -> tuple[float, int, str]:
    try:
        return (*count_flops(workload, mode, "meta"), "meta")
    except Exception:  # some models read tensor values (a data-dependent branch): count for real
        return (*count_flops(workload, mode, "cpu"), "cpu")


def model_facts(name: str, size: str = "published") -> ModelFacts:
    """Facts for workload ``name`` at ``size``; counting failures are reported, not raised."""
    return _facts(get_workload_class(name), name, size)


def clear_facts_cache() -> None:
    """Forget the facts counted in this process (e.g. after an optional library came or went)."""
    _facts.cache_clear()


@functools.cache
def _facts(cls: type[Workload], name: str, size: str) -> ModelFacts:
    # Cached per class, not per name: two bench() models may share a name in one process.
    workload = cls(size)
    weights = getattr(cls, "torchvision_weights", None)
    facts: dict[str, Any] = dict(
        name=name, description=cls.description, source=cls.source,
        modes=(*cls.modes, "generate") if generates(cls) else tuple(cls.modes),
        input_shape=tuple(cls.input_shape),
        default_batch_size={m: workload.batch_size(m) for m in cls.modes},
        dataset_size={m: workload.samples_per_epoch(m) for m in cls.modes},
        tokens_per_sample={m: tokens for m in cls.modes
                           if (tokens := workload.tokens_per_sample(m)) is not None},
        torchvision=torchvision_figures(weights, getattr(cls, "torchvision_note", "")) if weights
        else None,
    )
    reason = workload.unavailable_reason()
    if reason:
        return ModelFacts(**facts, available=False, unavailable_reason=reason)
    per_mode: dict[str, float] = {}
    try:
        for mode in cls.modes:
            per_mode[mode], facts["parameters"], facts["counted_on"] = _count_anywhere(workload, mode)
        if "eval" in per_mode:
            facts["forward_flops_per_sample"] = per_mode["eval"]
    except Exception as error:
        facts["count_error"] = f"{type(error).__name__}: {error}"
    return ModelFacts(**facts, available=True, flops_per_sample=per_mode)


def flops_per_sample(workload_name: str, mode: str, size: str = "published") -> float | None:
    """Counted FLOPs one sample costs in ``mode`` (None when they cannot be counted here).

    Evaluation is the forward pass. Training is a whole counted training step, forward plus
    backward: it lands close to the standard estimate of 3x the forward (the backward computes
    gradients for both activations and weights, each about one forward), a little under it because
    the first layer needs no input gradient. For SimCLR a training sample is two augmented views
    through backbone and projection head, while evaluation embeds one image with the backbone.
    """
    return model_facts(workload_name, size).flops_per_sample.get(mode)
