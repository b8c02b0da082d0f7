"""What ``accelbench list`` shows of a workload, as plain data (torch-free, so that facts read
back from the cache (workloads/facts_cache.py) need no torch): parameters, FLOPs per sample,
torchvision's published figures. ``workloads/facts.py`` counts them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

TORCHVISION_LABEL = "torchvision published (multiply-adds)"


@dataclass(frozen=True)
class TorchvisionFigures:
    """The figures torchvision publishes for a pretrained weight set (224x224, batch 1)."""

    weights: str
    parameters: int
    gmacs: float
    metrics: dict[str, Any]
    note: str = ""
    label: str = TORCHVISION_LABEL


@dataclass(frozen=True)
class ModelFacts:
    name: str
    description: str
    source: str
    modes: tuple[str, ...]
    input_shape: tuple[int, ...]
    default_batch_size: dict[str, int]
    dataset_size: dict[str, int]
    available: bool
    unavailable_reason: str | None = None
    parameters: int | None = None
    #: Counted FLOPs per sample of one step in each mode (training: forward + backward).
    flops_per_sample: dict[str, float] = field(default_factory=dict)
    #: Counted FLOPs per sample of the model's forward alone (the evaluation step's forward).
    forward_flops_per_sample: float | None = None
    #: Tokens per sample in each mode, for a language model (FLOPs per token = FLOPs per sample /
    #: tokens, tokens/s = samples/s x tokens); empty when a sample is not tokens.
    tokens_per_sample: dict[str, int] = field(default_factory=dict)
    counted_on: str | None = None
    count_error: str | None = None
    torchvision: TorchvisionFigures | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["modes"] = list(self.modes)
        data["input_shape"] = list(self.input_shape)
        return data



def facts_from_dict(data: dict[str, Any]) -> ModelFacts:
    """A ModelFacts back from ``to_dict`` (the cache's form)."""
    values = dict(data)
    values["modes"] = tuple(values["modes"])
    values["input_shape"] = tuple(values["input_shape"])
    if values.get("torchvision") is not None:
        values["torchvision"] = TorchvisionFigures(**values["torchvision"])
    return ModelFacts(**values)
