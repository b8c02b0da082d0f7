"""What one decode step reads from memory, and decode speed read against the measured bandwidth.

Decoding one token per sequence reads every weight the step uses in full, and the keys and values
of every position cached so far; at batch sizes a GPU decodes at, those reads dominate the step
(gpt-fast's "effective bandwidth": bytes per step x steps per second). Counted here, each at the
dtype the step really reads:

- weights: each parameter a decode step passes to anything but a row lookup, once (tied weights
  once). An embedding table read only by rows (the input embedding of a model with an untied
  output layer, learned positions) is left out: a step reads B of its rows. Which parameters
  those are is found by running one decode step of the eager model under a ``TorchFunctionMode``
  that notes every call a parameter reaches (a tied output layer reads the token table through
  ``linear``, so it counts). A parameter is counted at the dtype it is stored in, except one that
  autocast casts (the weights of products: ``linear``, ``matmul``, convolutions), seen as the
  cast below autocast (a ``TorchDispatchMode``, with autocast's cast cache off for that one step):
  - cached: autocast keeps the low-precision copy of an fp32 leaf parameter that requires grad
    for as long as its outermost autocast context lasts (``cached_cast`` in ATen's
    autocast_mode.h). A generate case enters autocast once around all its rounds
    (``engine/measure_case.py``), so each step reads only that copy: counted at the autocast
    dtype (2 bytes in amp-bf16 and amp-fp16, not the 4 the parameter is stored in);
  - cast every step: a compiled graph takes the parameters as inputs and casts them in the graph
    (``aten._to_copy`` on every call; autocast's cache is eager's), and autocast does not cache a
    parameter that is not an fp32 leaf requiring grad: counted as the stored read, the copy's
    write and its read (4 + 2 + 2 bytes in amp-bf16);
- cache: the keys and values of the positions filled so far (prompt plus the tokens decoded
  before), averaged over the decode steps of a generation: per position bytes x (P + N / 2), at
  the dtype the cache's tensors have (found on a one-token prefill: under autocast the keys come
  out of a product in the autocast dtype; a model may keep keys and values in different dtypes).
  A static cache attends over its whole buffer under a mask, so it reads more than this and the
  bandwidth is then a lower bound;
- a weight-only quantized layer (``int8-wo``, ``int4-wo``, measure/generation/quantize.py): its buffers as
  stored, at the packed size: the int8 or packed 4-bit weight and the scales and zero points
  beside it (so the bandwidth share of a quantized decode stays true);
- a packed tensor subclass (torchao's, measure/generation/torchao_quant.py): the inner tensors its
  product really touches, seen below it (by storage): read as stored (int4's packed weight and
  scales through ``_weight_int4pack_mm``), or cast every step (torchao's eager int8 product
  casts its whole int8 weight to the activation dtype: read, write, read); inner tensors it does
  not touch (a symmetric scheme's zero points) are not counted;
- not counted: activations, the logits written, the rows of embedding tables.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

BYTES_COUNTED = ("weights: every parameter a decode step reads in full, once (embedding tables read "
                 "by row left out; a quantized layer's packed weight, scales and zero points as "
                 "stored), at the dtype read: as stored, except a weight autocast casts "
                 "(products), counted at the autocast dtype where autocast's cast cache holds its "
                 "copy for the whole generation (eager: one autocast context around every round), "
                 "and as the stored read plus the copy's write and read where it is cast every step "
                 "(a compiled graph, or a weight autocast does not cache); cache: keys and values of "
                 "the positions filled so far, at the dtype of the cache's tensors, averaged over "
                 "the decode steps (P + N/2 positions); activations and logits not counted")

#: Set on a buffer whose cast a compiled product fuses (gpt-fast's int8 ``w.to(x.dtype)`` under
#: inductor's matrix-vector decomposition): the step reads it as stored, once, not cast and read
#: again (measured on an H100: counted as a cast, llama-1b int8-wo read "191%" of the bandwidth).
FUSED_READ = "_accelbench_cast_fused"

#: Calls that read only rows of a table (B of them per step), not the whole parameter.
_ROW_READS = {F.embedding, torch.embedding, torch.Tensor.__getitem__, torch.index_select,
              torch.Tensor.index_select}
#: Calls that read a tensor's metadata, not its data.
_METADATA = {"__get__", "size", "dim", "stride", "numel", "element_size", "is_floating_point",
             "is_complex", "data_ptr", "storage_offset", "is_contiguous", "__len__", "nelement",
             "get_device", "__hash__", "__format__", "__repr__"}
#: Calls by which a model converts a parameter itself, every time it runs.
_CONVERSIONS = {"to", "type", "type_as", "half", "bfloat16", "float", "double"}


class _ParameterReads(TorchFunctionMode):
    """Notes, by id, every parameter that reaches a call other than a row lookup or metadata, and
    those the model converts itself (``weight.to(x.dtype)``)."""

    def __init__(self, parameters: dict[int, torch.Tensor]) -> None:
        super().__init__()
        self.parameters = parameters
        self.read: set[int] = set()
        self.converted: set[int] = set()

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if func not in _ROW_READS and name not in _METADATA:
            for value in (*args, *kwargs.values()):
                for item in value if isinstance(value, (list, tuple)) else (value,):
                    if isinstance(item, torch.Tensor) and id(item) in self.parameters:
                        self.read.add(id(item))
            if name in _CONVERSIONS and args and id(args[0]) in self.parameters:
                self.converted.add(id(args[0]))
        return func(*args, **kwargs)


class _Casts(TorchDispatchMode):
    """Notes, by id, the dtype each parameter is cast to. Below autocast (a dispatch mode runs
    after it), autocast's cast of a parameter is an ``aten._to_copy`` of the parameter itself.
    A packed parameter's product runs on its inner tensors (by their storage): noted, per inner
    tensor, is whether the step reads it (None) or casts it (the dtype), views aside."""

    def __init__(self, parameters: dict[int, torch.Tensor]) -> None:
        super().__init__()
        self.parameters = parameters
        self.cast: dict[int, torch.dtype] = {}
        self.inner = {_storage(t): (key, name) for key, p in parameters.items() if _is_packed(p)
                      for name, t in _inner_tensors(p) if _storage(t)}
        self.inner_reads: dict[int, dict[str, torch.dtype | None]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        to_copy = func is torch.ops.aten._to_copy.default
        if to_copy and args and id(args[0]) in self.parameters:
            dtype = kwargs.get("dtype")
            if dtype is not None and dtype != args[0].dtype:
                self.cast[id(args[0])] = dtype
        if self.inner and not getattr(func, "is_view", False):
            for item in (*args, *kwargs.values()):
                owner = self.inner.get(_storage(item)) if type(item) is torch.Tensor else None
                if owner is not None:
                    dtype = kwargs.get("dtype") if to_copy and item is args[0] else None
                    reads = self.inner_reads.setdefault(owner[0], {})
                    if dtype is not None and dtype != item.dtype:
                        reads[owner[1]] = dtype
                    else:
                        reads.setdefault(owner[1], None)
        return func(*args, **kwargs)


def _is_packed(tensor: torch.Tensor) -> bool:
    return type(tensor) not in (torch.Tensor, nn.Parameter) and hasattr(type(tensor), "__tensor_flatten__")


def _inner_tensors(tensor: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    names, _ = tensor.__tensor_flatten__()  # type: ignore[attr-defined]  # a subclass's (_is_packed)
    return [(name, getattr(tensor, name)) for name in names]


def _storage(tensor: Any) -> int:
    """The address of a plain tensor's storage (0 for none): a view shares its base's."""
    try:
        return int(tensor.untyped_storage().data_ptr())
    except Exception:  # no storage (a subclass, a meta tensor)
        return 0


def _packed_reads(parameter: torch.Tensor, inner: dict[str, torch.dtype | None]) -> Iterator[tuple[str, int]]:
    """(how, bytes) of the inner tensors of a packed parameter that a step read or cast: a cast
    (torchao's int8 product casts the whole int8 weight each call) is the stored read, the copy's
    write and its read, unless the compiled product fuses it (FUSED_READ)."""
    what = f"{type(parameter).__name__} (packed)"
    fused = getattr(parameter, FUSED_READ, False)
    for name, to in inner.items():
        tensor = getattr(parameter, name)
        stored = tensor.numel() * tensor.element_size()
        if to is None:
            yield f"{what} as stored", stored
        elif fused:
            yield f"{what}: {_dtype_name(tensor.dtype)} as stored (its cast fused into the product)", stored
        else:
            yield (f"{what}: {_dtype_name(tensor.dtype)} cast to {_dtype_name(to)} every step "
                   "(read, write, read)", stored + 2 * tensor.numel() * to.itemsize)


@contextlib.contextmanager
def _autocast_cache_off() -> Iterator[None]:
    """Autocast casts afresh inside (so the casts can be seen), and caches again after; the copies
    it holds already are kept (the cache is cleared only when the outermost autocast ends)."""
    before = torch.is_autocast_cache_enabled()
    torch.set_autocast_cache_enabled(False)
    try:
        yield
    finally:
        torch.set_autocast_cache_enabled(before)


def _autocast_keeps(parameter: torch.Tensor) -> bool:
    """Whether autocast's cast cache keeps this parameter's copy (ATen autocast_mode.h,
    ``cached_cast``'s ``can_try_cache``: an fp32 leaf that requires grad and is not a view)."""
    return (parameter.dtype == torch.float32 and parameter.requires_grad and parameter.is_leaf
            and not parameter._is_view())


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class WeightReads:
    """The bytes of the weights one decode step reads, by how they are read (a key per way:
    "float32 as stored", "bfloat16 autocast copy (cast cache)", "float32 cast to bfloat16 every
    step (read, write, read)")."""

    by_read: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.by_read.values())


def unique_parameters(model: nn.Module) -> dict[int, torch.Tensor]:
    """The model's parameters and buffers by id: a weight-only quantized layer keeps its packed
    weight, scales and zero points as buffers (measure/generation/quantize.py), read in full each step."""
    return {id(t): t for t in (*model.parameters(), *model.buffers())}


def parameter_bytes(parameters: list[nn.Parameter] | Any) -> int:
    return sum(stored_bytes(p) for p in parameters)


def stored_bytes(tensor: torch.Tensor) -> int:
    """The bytes a tensor holds: a tensor subclass that packs its data (torchao's quantized
    weights) by its inner tensors (``__tensor_flatten__``), not by its logical shape and dtype."""
    if not _is_packed(tensor):
        return tensor.numel() * tensor.element_size()
    return sum(stored_bytes(inner) for _, inner in _inner_tensors(tensor))


def weight_reads(step: Callable[[], object], model: nn.Module, *, casts_cached: bool = True) -> WeightReads:
    """The parameters of ``model`` that ``step()`` (one decode step of the eager model, run in
    the caller's autocast, if any) reads in full, each at the dtype read; see the module's
    docstring. ``casts_cached``: the generation runs eagerly, so autocast's cast cache serves
    every step (False for a compiled graph, which casts its parameter inputs on every call)."""
    parameters = unique_parameters(model)
    cached = casts_cached and torch.is_autocast_cache_enabled()
    with _ParameterReads(parameters) as reads, _autocast_cache_off(), _Casts(parameters) as casts:
        step()
    by_read: dict[str, int] = {}
    for key in reads.read:
        parameter = parameters[key]
        stored, elements = parameter.dtype, parameter.numel()
        to = casts.cast.get(key)
        if key in casts.inner_reads:
            for how, nbytes in _packed_reads(parameter, casts.inner_reads[key]):
                by_read[how] = by_read.get(how, 0) + nbytes
            continue
        if to is not None and getattr(parameter, FUSED_READ, False):
            how, nbytes = f"{_dtype_name(stored)} as stored (its cast fused into the product)", \
                stored_bytes(parameter)
        elif to is None:
            packed = type(parameter) not in (torch.Tensor, nn.Parameter)
            what = f"{type(parameter).__name__} (packed)" if packed else _dtype_name(stored)
            how, nbytes = f"{what} as stored", stored_bytes(parameter)
        elif cached and key not in reads.converted and _autocast_keeps(parameter):
            how = f"{_dtype_name(to)} autocast copy (cast cache)"
            nbytes = elements * to.itemsize
        else:
            how = f"{_dtype_name(stored)} cast to {_dtype_name(to)} every step (read, write, read)"
            nbytes = elements * (parameter.element_size() + 2 * to.itemsize)
        by_read[how] = by_read.get(how, 0) + nbytes
    return WeightReads(dict(sorted(by_read.items())))


def weights_read_by(step: Callable[[], object], model: nn.Module, *, casts_cached: bool = True) -> int:
    """Bytes of the parameters of ``model`` that ``step()`` reads in full (see weight_reads)."""
    return weight_reads(step, model, casts_cached=casts_cached).total


def _floating_tensors(value: object, found: dict[int, torch.Tensor], depth: int = 0) -> None:
    """The floating-point tensors ``value`` holds, through lists, tuples, dicts and attributes
    (a static KVCache's buffers; transformers' DynamicCache's layers' keys and values)."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            found[id(value)] = value
        return
    if depth >= 4 or value is None or isinstance(value, (str, bytes, int, float, bool, nn.Module)):
        return
    items: Iterable[object]
    if isinstance(value, dict):
        items = value.values()
    elif isinstance(value, (list, tuple, set)):
        items = value
    else:
        items = getattr(value, "__dict__", {}).values()
    for item in items:
        _floating_tensors(item, found, depth + 1)


def cache_element_size(cache: object) -> float | None:
    """Bytes per element of the keys and values ``cache`` holds (the mean over its floating-point
    tensors, by their sizes: keys and values may differ in dtype); None where it holds none."""
    found: dict[int, torch.Tensor] = {}
    _floating_tensors(cache, found)
    elements = sum(t.numel() for t in found.values())
    if not elements:
        return None
    return sum(t.numel() * t.element_size() for t in found.values()) / elements


def cache_bytes_read_per_step(bytes_per_position: float, prompt_len: int, new_tokens: int) -> int:
    """Mean cache bytes a decode step reads over a generation of ``new_tokens`` from a prompt of
    ``prompt_len``: step i (1 .. N-1) reads the P + i positions filled by then, a mean of P + N/2."""
    if new_tokens < 2:
        return 0
    return round(bytes_per_position * (prompt_len + new_tokens / 2))


# --- decode against the measured bandwidth ------------------------------------------------------
WITHIN = "within the measured bandwidth"
CACHE_RESIDENT = "above the measured bandwidth: the bytes fit in the last-level cache"
MEASUREMENT_ERROR = "above the measured bandwidth: a measurement error"
#: MPS (and any device whose adapter gives no ``last_level_cache_bytes``): an Apple GPU's system
#: level cache is not reported, so a model that fits in it can read faster than the bandwidth.
CACHE_SIZE_UNKNOWN = ("above the measured bandwidth; this device reports no cache size, so a model "
                      "that fits its cache can read faster")


@dataclass(frozen=True)
class BandwidthJudgement:
    #: Effective decode bandwidth (bytes per step x steps per second) over the measured bandwidth.
    share: float
    verdict: str
    #: True when the share is beyond 100% and the bytes do not fit in the last-level cache (a
    #: device that reports no cache size is not flagged: it is "above", with why it can be).
    flagged: bool

    def to_dict(self) -> dict[str, Any]:
        return {"share": self.share, "verdict": self.verdict, "flagged": self.flagged}


def judge_bandwidth(effective_bytes_per_s: float, measured_bytes_per_s: float, bytes_per_step: int,
                    last_level_cache_bytes: int | None = None) -> BandwidthJudgement:
    """Decode's effective bandwidth as a share of the bandwidth ``roofline`` measured. Reading
    more than memory can deliver is impossible, so above 100% is a measurement error, unless
    every byte a step reads fits in the last-level cache (then the step reads from the cache).
    Where the device reports no cache size (``None``: MPS) that cannot be decided, and the
    verdict says so instead of calling it an error."""
    if measured_bytes_per_s <= 0:
        raise ValueError(f"measured bandwidth must be positive, not {measured_bytes_per_s}")
    share = effective_bytes_per_s / measured_bytes_per_s
    if share <= 1.0:
        return BandwidthJudgement(share, WITHIN, False)
    if last_level_cache_bytes is None:
        return BandwidthJudgement(share, CACHE_SIZE_UNKNOWN, False)
    if bytes_per_step <= last_level_cache_bytes:
        return BandwidthJudgement(share, CACHE_RESIDENT, False)
    return BandwidthJudgement(share, MEASUREMENT_ERROR, True)


# --- which bound a decode hit ---------------------------------------------------------------------
#: A TPOT more than this many times the bandwidth floor is not the memory's doing: the step waits
#: on the host (Python, the dispatcher, one kernel launch per op), which CUDA graphs remove.
OVERHEAD_FACTOR = 3.0
OVERHEAD, BANDWIDTH = "overhead", "bandwidth"


@dataclass(frozen=True)
class DecodeBound:
    """Which limit a decode row ran into: the floor is the time reading a step's bytes takes at
    the measured bandwidth (bytes per step / bandwidth); a TPOT over OVERHEAD_FACTOR x the floor
    is overhead-bound (host launches), one within it bandwidth-bound."""

    bound: str
    floor_s: float
    #: TPOT over the floor (1 = at the bandwidth).
    ratio: float
    host_cpu: str

    @property
    def words(self) -> str:
        if self.bound == OVERHEAD:
            return (f"overhead-bound (host launches, {self.host_cpu}): {self.ratio:.0f}x the "
                    "bandwidth floor")
        return f"bandwidth-bound: {1 / self.ratio:.0%} of measured bandwidth"

    def to_dict(self) -> dict[str, Any]:
        return {"decode_bound": self.bound, "decode_floor_s": self.floor_s,
                "decode_floor_ratio": self.ratio, "decode_bound_words": self.words,
                "host_cpu": self.host_cpu}


def judge_decode(tpot_s: float, bytes_per_step: int, bandwidth_bytes_per_s: float,
                 host_cpu: str) -> DecodeBound:
    """The bound of a decode whose steps took ``tpot_s`` and read ``bytes_per_step`` on a device
    whose memory delivers ``bandwidth_bytes_per_s`` (measured), driven from ``host_cpu``."""
    if tpot_s <= 0 or bytes_per_step <= 0 or bandwidth_bytes_per_s <= 0:
        raise ValueError("a decode bound needs a positive TPOT, bytes per step and bandwidth")
    floor = bytes_per_step / bandwidth_bytes_per_s
    ratio = tpot_s / floor
    return DecodeBound(OVERHEAD if ratio > OVERHEAD_FACTOR else BANDWIDTH, floor, ratio, host_cpu)


def decode_judgements(effective_bytes_per_s: float, tpot_s: float, bytes_per_step: int,
                      measured_bytes_per_s: float, last_level_cache_bytes: int | None,
                      host_cpu: str) -> dict[str, Any]:
    """A generation result's bandwidth share and verdict (judge_bandwidth) and its bound
    (judge_decode), as the result keeps them: computed once when a case (or a --repeat's
    pooled rounds) is made."""
    judged = judge_bandwidth(effective_bytes_per_s, measured_bytes_per_s, bytes_per_step,
                             last_level_cache_bytes)
    bound = judge_decode(tpot_s, bytes_per_step, measured_bytes_per_s, host_cpu)
    return {"bandwidth_share": judged.share, "bandwidth_verdict": judged.verdict, **bound.to_dict()}
