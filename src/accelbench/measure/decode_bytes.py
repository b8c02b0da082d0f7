"""What one decode step reads from memory, and decode speed read against the measured bandwidth.

Decoding one token per sequence reads every weight the step uses in full, and the keys and values
of every position cached so far; at batch sizes a GPU decodes at, those reads dominate the step
(gpt-fast's "effective bandwidth": bytes per step x steps per second). Counted here:

- weights: each parameter a decode step passes to anything but a row lookup, once (tied weights
  once), at the dtype it is stored in on the device. An embedding table read only by rows (the
  input embedding of a model with an untied output layer, learned positions) is left out: a step
  reads B of its rows. Which parameters those are is found by running one decode step of the
  eager model under a ``TorchFunctionMode`` that notes every call a parameter reaches (a tied
  output layer reads the token table through ``linear``, so it counts);
- cache: the keys and values of the positions filled so far (prompt plus the tokens decoded
  before), averaged over the decode steps of a generation: per position bytes x (P + N / 2).
  A static cache attends over its whole buffer under a mask, so it reads more than this and the
  bandwidth is then a lower bound;
- not counted: activations, the logits written, the rows of embedding tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

BYTES_COUNTED = ("weights: every parameter a decode step reads in full, once, as stored on the device "
                 "(embedding tables read by row left out); cache: keys and values of the positions "
                 "filled so far, averaged over the decode steps (P + N/2 positions); activations and "
                 "logits not counted")

#: Calls that read only rows of a table (B of them per step), not the whole parameter.
_ROW_READS = {F.embedding, torch.embedding, torch.Tensor.__getitem__, torch.index_select,
              torch.Tensor.index_select}
#: Calls that read a tensor's metadata, not its data.
_METADATA = {"__get__", "size", "dim", "stride", "numel", "element_size", "is_floating_point",
             "is_complex", "data_ptr", "storage_offset", "is_contiguous", "__len__", "nelement",
             "get_device", "__hash__", "__format__", "__repr__"}


class _ParameterReads(TorchFunctionMode):
    """Notes, by id, every parameter that reaches a call other than a row lookup or metadata."""

    def __init__(self, parameters: dict[int, nn.Parameter]) -> None:
        super().__init__()
        self.parameters = parameters
        self.read: set[int] = set()

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func not in _ROW_READS and getattr(func, "__name__", "") not in _METADATA:
            for value in (*args, *kwargs.values()):
                for item in value if isinstance(value, (list, tuple)) else (value,):
                    if isinstance(item, torch.Tensor) and id(item) in self.parameters:
                        self.read.add(id(item))
        return func(*args, **kwargs)


def unique_parameters(model: nn.Module) -> dict[int, nn.Parameter]:
    return {id(p): p for p in model.parameters()}


def parameter_bytes(parameters: list[nn.Parameter] | Any) -> int:
    return sum(p.numel() * p.element_size() for p in parameters)


def weights_read_by(step: Callable[[], object], model: nn.Module) -> int:
    """Bytes of the parameters of ``model`` that ``step()`` (one decode step of the eager model)
    reads in full; see the module's docstring."""
    parameters = unique_parameters(model)
    with _ParameterReads(parameters) as reads:
        step()
    return parameter_bytes(parameters[key] for key in reads.read)


def cache_bytes_read_per_step(bytes_per_position: int, prompt_len: int, new_tokens: int) -> int:
    """Mean cache bytes a decode step reads over a generation of ``new_tokens`` from a prompt of
    ``prompt_len``: step i (1 .. N-1) reads the P + i positions filled by then, a mean of P + N/2."""
    if new_tokens < 2:
        return 0
    return round(bytes_per_position * (prompt_len + new_tokens / 2))


# --- decode against the measured bandwidth ------------------------------------------------------
WITHIN = "within the measured bandwidth"
CACHE_RESIDENT = "above the measured bandwidth: the bytes fit in the last-level cache"
MEASUREMENT_ERROR = "above the measured bandwidth: a measurement error"


@dataclass(frozen=True)
class BandwidthJudgement:
    #: Effective decode bandwidth (bytes per step x steps per second) over the measured bandwidth.
    share: float
    verdict: str
    #: True when the share is beyond 100% and the bytes do not fit in the last-level cache.
    flagged: bool

    def to_dict(self) -> dict[str, Any]:
        return {"share": self.share, "verdict": self.verdict, "flagged": self.flagged}


def judge_bandwidth(effective_bytes_per_s: float, measured_bytes_per_s: float, bytes_per_step: int,
                    last_level_cache_bytes: int | None = None) -> BandwidthJudgement:
    """Decode's effective bandwidth as a share of the bandwidth ``roofline`` measured. Reading
    more than memory can deliver is impossible, so above 100% is a measurement error, unless
    every byte a step reads fits in the last-level cache (then the step reads from the cache)."""
    if measured_bytes_per_s <= 0:
        raise ValueError(f"measured bandwidth must be positive, not {measured_bytes_per_s}")
    share = effective_bytes_per_s / measured_bytes_per_s
    if share <= 1.0:
        return BandwidthJudgement(share, WITHIN, False)
    if last_level_cache_bytes is not None and bytes_per_step <= last_level_cache_bytes:
        return BandwidthJudgement(share, CACHE_RESIDENT, False)
    return BandwidthJudgement(share, MEASUREMENT_ERROR, True)
