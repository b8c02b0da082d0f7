"""Measuring greedy generation with a key/value cache: time to first token, prefill and decode
speed, inter-token latency, and what decoding reads from memory.

One round: the prompt (B x P) is prefilled into a fresh cache, the first new token is the argmax
of the prefill's logits, then N - 1 decode steps give one token per sequence each: exactly N new
tokens, end-of-sequence ignored (gpt-fast's ``generate``). Warm-up rounds run first (compilation,
allocator, caches), then the timed rounds; each round's figures are kept, and the summaries are
medians over rounds.

How it is timed: ``generation_clocks.py`` (the record's ``timing_method`` says which).

Time to first token holds the prefill and the first token's argmax; prefill tokens/s is B x P over
that time. Decode tokens/s per sequence is the decode steps over their time; in total, B times it.
"""

from __future__ import annotations

import statistics
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from accelbench.devices import Device
from accelbench.errors import UsageError
from accelbench.measure.generation.decode_bytes import (
    BYTES_COUNTED,
    WeightReads,
    cache_bytes_read_per_step,
    cache_element_size,
    weight_reads,
)
from accelbench.measure.generation.generation_clocks import (
    EVENTS,
    EVENTS_FAILED,
    HOST,
    STREAMED,
    WINDOW_TOKENS,
    WINDOWS,
    WINDOWS_NO_EVENTS,
    GenerationRound,
    HostClock,
    clock_maker,
)
from accelbench.measure.generation.settle import RoundRule, percentile, round_figures, tail, tail_statistics
from accelbench.measure.loop.median_ci import NOISY_REL_IQR, median_ci, relative_iqr
from accelbench.measure.loop.stop import StopRule

if TYPE_CHECKING:
    from accelbench.measure.trackers.region import MemoryTracker


class GenerationWorkload(Protocol):
    """The generation contract (``accelbench.workloads.base.GENERATION``)."""

    def context_length(self) -> int: ...

    def make_prompt(self, batch_size: int, prompt_len: int, seed: int) -> torch.Tensor: ...

    def prefill(self, model: nn.Module, prompt: torch.Tensor,
                max_len: int) -> tuple[torch.Tensor, object]: ...

    def decode_step(self, model: nn.Module, tokens: torch.Tensor,
                    cache: object) -> tuple[torch.Tensor, object]: ...

    def kv_cache_bytes(self, batch_size: int, max_len: int, dtype: torch.dtype) -> int: ...


@dataclass(frozen=True)
class GenerationFigures:
    """A generation case's figures: the ``generation`` field of its result."""

    batch_size: int
    prompt_len: int
    new_tokens: int
    timing_method: str
    rounds: tuple[GenerationRound, ...]
    warmup_rounds: int
    #: The full cache prefill allocates (P + N positions, every layer, keys and values).
    kv_cache_bytes: int
    weight_bytes_per_step: int
    cache_bytes_per_step: int
    bytes_counted: str = BYTES_COUNTED
    peak_memory_bytes: int | None = None
    window_tokens: int | None = None
    #: The warm-up rounds' own times (compile, first use), kept apart from the timed rounds:
    #: results/first_use.py reads a generation case's first-use and compile costs from them.
    warmup: tuple[GenerationRound, ...] = ()
    #: Each token was read to the host as it was made (``--stream``): not the same work as a
    #: case whose tokens stay on the device until the round ends.
    streamed: bool = False
    #: ``weight_bytes_per_step`` by how each weight is read (decode_bytes.WeightReads): as stored,
    #: autocast's cached copy, or cast every step; {} in a result written before it was kept.
    weight_reads: dict[str, int] = field(default_factory=dict)
    #: Bytes per element of the cached keys and values, as the cache's tensors have them (2 for
    #: bf16, 4 for fp32; between where keys and values differ); None where not recorded.
    kv_element_bytes: float | None = None
    #: The first timed round's greedy tokens (B x N), read after it: what its hash proves
    #: (reference/expected_tokens.py). Not written to JSON (the result keeps the hash), nor
    #: compared (a result read back has none).
    tokens: tuple[tuple[int, ...], ...] = field(default=(), compare=False)
    #: Why the timed rounds stopped (settle.py): "rounds" (a fixed count), "time budget",
    #: "precision reached"; "" in a result written before it was kept.
    stop_reason: str = ""

    @property
    def decode_steps(self) -> int:
        return self.new_tokens - 1

    @property
    def bytes_per_step(self) -> int:
        """Bytes one decode step reads (one token for each of the B sequences)."""
        return self.weight_bytes_per_step + self.cache_bytes_per_step

    # The field's definitions (MLPerf Inference, vLLM), one statistic per name (the figure
    # catalogue, results/catalogue.py, lists them): TTFT is the median round's time to the first
    # token; TPOT the median round's (end-to-end - TTFT) / (N - 1); every rate is derived from one
    # of those two medians, so the prefill and decode rates can never disagree with them.
    @property
    def ttft_s(self) -> float:
        return statistics.median(r.ttft_s for r in self.rounds)

    def ttft_percentile_s(self, q: float) -> float:
        """TTFT's q-th percentile across rounds (p90, p99: the tail MLPerf budgets), or their
        maximum where the rounds are too few for it (settle.tail; ``tail_statistics`` says)."""
        return tail([r.ttft_s for r in self.rounds], q)[0]

    @property
    def round_figures_s(self) -> list[float]:
        """Each round's TPOT (its decode time / (N - 1)); its TTFT where there is no decode step:
        what the rounds settle on (settle.py) and how far apart they are (``round_spread``)."""
        return round_figures(self.rounds, self.decode_steps)

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: the median round's decode time / (N - 1)."""
        if not self.decode_steps:
            return None
        return statistics.median(self.round_figures_s)

    def tpot_percentile_s(self, q: float) -> float | None:
        """As ``ttft_percentile_s``, of the rounds' TPOT."""
        if not self.decode_steps:
            return None
        return tail(self.round_figures_s, q)[0]

    @property
    def tpot_ci_s(self) -> tuple[float, float] | None:
        """The median TPOT's 95% order-statistic interval across rounds (the full range below 6)."""
        if not self.decode_steps:
            return None
        return median_ci(self.round_figures_s)

    @property
    def round_spread(self) -> float:
        """The rounds' TPOT (TTFT without decode steps) interquartile range over their median:
        above NOISY_REL_IQR the case is noisy, as a step case whose steps spread so is."""
        return relative_iqr(self.round_figures_s)

    @property
    def tail_statistics(self) -> dict[str, str]:
        """What each tail figure is ("p99 of 120", "max of 12": settle.tail_statistics)."""
        return tail_statistics([r.ttft_s for r in self.rounds],
                               self.round_figures_s if self.decode_steps else [], self.token_times_s)

    @property
    def prefill_tokens_per_s(self) -> float:
        """B x P over the median TTFT (so it is TTFT's own statistic)."""
        return self.batch_size * self.prompt_len / self.ttft_s

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Per sequence: 1 / TPOT."""
        tpot = self.tpot_s
        return None if not tpot else 1.0 / tpot

    @property
    def decode_tokens_per_s_total(self) -> float | None:
        """All sequences: B / TPOT (a generation case's headline rate)."""
        per_sequence = self.decode_tokens_per_s
        return None if per_sequence is None else per_sequence * self.batch_size

    @property
    def e2e_s(self) -> float:
        """End-to-end latency, a request's whole time (TTFT + its decode), as vLLM's
        benchmark_serving (E2EL) and MLPerf define it: the median round's."""
        return statistics.median(r.ttft_s + r.decode_s for r in self.rounds)

    @property
    def output_tokens_per_s(self) -> float:
        """B x N output tokens over the end-to-end latency (vLLM's output token throughput, one
        request of B sequences at a time)."""
        return self.batch_size * self.new_tokens / self.e2e_s

    @property
    def token_times_s(self) -> list[float]:
        return [t for r in self.rounds for t in r.token_times_s]

    @property
    def itl_median_s(self) -> float | None:
        times = self.token_times_s
        return statistics.median(times) if times else None

    @property
    def itl_p99_s(self) -> float | None:
        """The pooled per-token gaps' 99th percentile, or their maximum where fewer than 100."""
        times = self.token_times_s
        return tail(times, 99)[0] if times else None

    @property
    def effective_bandwidth_bytes_per_s(self) -> float | None:
        steps_per_s = self.decode_tokens_per_s
        return None if steps_per_s is None else self.bytes_per_step * steps_per_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size, "prompt_len": self.prompt_len, "new_tokens": self.new_tokens,
            "timing_method": self.timing_method, "warmup_rounds": self.warmup_rounds,
            "window_tokens": self.window_tokens,
            "ttft_s": self.ttft_s, "ttft_p90_s": self.ttft_percentile_s(90),
            "ttft_p99_s": self.ttft_percentile_s(99),
            "tpot_s": self.tpot_s, "tpot_p99_s": self.tpot_percentile_s(99),
            "tpot_ci_s": list(self.tpot_ci_s) if self.tpot_ci_s else None,
            "prefill_tokens_per_s": self.prefill_tokens_per_s,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "decode_tokens_per_s_total": self.decode_tokens_per_s_total,
            "e2e_s": self.e2e_s, "output_tokens_per_s": self.output_tokens_per_s,
            "itl_median_s": self.itl_median_s, "itl_p99_s": self.itl_p99_s,
            "kv_cache_bytes": self.kv_cache_bytes, "weight_bytes_per_step": self.weight_bytes_per_step,
            "cache_bytes_per_step": self.cache_bytes_per_step, "bytes_per_step": self.bytes_per_step,
            "bytes_counted": self.bytes_counted,
            "effective_bandwidth_bytes_per_s": self.effective_bandwidth_bytes_per_s,
            "peak_memory_bytes": self.peak_memory_bytes,
            "rounds": [r.to_dict() for r in self.rounds],
            "warmup": [r.to_dict() for r in self.warmup], "streamed": self.streamed,
            "weight_reads": dict(self.weight_reads), "kv_element_bytes": self.kv_element_bytes,
            "stop_reason": self.stop_reason, "tail_statistics": self.tail_statistics,
            "round_spread": self.round_spread, "noisy": self.round_spread > NOISY_REL_IQR,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationFigures:
        """The raw fields; the summaries in ``data`` are derived again from the rounds."""
        return cls(
            batch_size=int(data["batch_size"]), prompt_len=int(data["prompt_len"]),
            new_tokens=int(data["new_tokens"]), timing_method=str(data["timing_method"]),
            rounds=tuple(GenerationRound.from_dict(r) for r in data["rounds"]),
            warmup_rounds=int(data["warmup_rounds"]), kv_cache_bytes=int(data["kv_cache_bytes"]),
            weight_bytes_per_step=int(data["weight_bytes_per_step"]),
            cache_bytes_per_step=int(data["cache_bytes_per_step"]),
            bytes_counted=str(data.get("bytes_counted", BYTES_COUNTED)),
            peak_memory_bytes=data.get("peak_memory_bytes"), window_tokens=data.get("window_tokens"),
            warmup=tuple(GenerationRound.from_dict(r) for r in data.get("warmup", ())),
            streamed=bool(data.get("streamed", False)),
            weight_reads={str(k): int(v) for k, v in (data.get("weight_reads") or {}).items()},
            kv_element_bytes=data.get("kv_element_bytes"), stop_reason=str(data.get("stop_reason") or ""))


# --- one round, and the measurement ---------------------------------------------------------------
@torch.no_grad()
def greedy_round(workload: GenerationWorkload, model: nn.Module, prompt: torch.Tensor, new_tokens: int,
                 clock: HostClock, stream: bool = False,
                 decode_model: nn.Module | None = None) -> tuple[torch.Tensor, GenerationRound]:
    """Generate exactly ``new_tokens`` per sequence from ``prompt`` (on the model's device),
    timed by ``clock``; (the new tokens (B, N) on the device, the round's times). ``stream``:
    each token is read to the host as it is made, inside its step's time. ``decode_model``: what
    the decode steps run (the execution recipe's compiled decode step, recipe.py); default
    ``model``, which the prefill runs."""
    decoder = model if decode_model is None else decode_model
    clock.start()
    logits, cache = workload.prefill(model, prompt, prompt.shape[1] + new_tokens)
    token = logits.argmax(dim=-1)
    if stream:
        token.tolist()  # the first token reaches the user: part of the time to first token
    clock.first_token()
    generated = [token]
    for _ in range(new_tokens - 1):
        logits, cache = workload.decode_step(decoder, token, cache)
        token = logits.argmax(dim=-1)
        if stream:
            token.tolist()
        clock.step()
        generated.append(token)
    times = clock.finish()
    return torch.stack(generated, dim=1), times


def check_lengths(workload: GenerationWorkload, batch_size: int, prompt_len: int, new_tokens: int) -> None:
    """UsageError naming the bad value and what is allowed."""
    for name, value in (("batch size", batch_size), ("--prompt-len", prompt_len),
                        ("--new-tokens", new_tokens)):
        if value < 1:
            raise UsageError(f"{name} must be at least 1, not {value}")
    context = workload.context_length()
    if prompt_len + new_tokens > context:
        raise UsageError(f"a prompt of {prompt_len} and {new_tokens} new tokens need "
                         f"{prompt_len + new_tokens} positions; this model's context holds {context}")


def _parameter_dtype(model: nn.Module) -> torch.dtype:
    for parameter in model.parameters():
        if parameter.is_floating_point():
            return parameter.dtype
    return torch.float32


def _decode_reads(workload: GenerationWorkload, model: nn.Module, device: Device,
                  casts_cached: bool) -> tuple[WeightReads, float | None]:
    """How the weights are read by a decode step, and the bytes per element of the cache's keys
    and values, from a one-token prefill and one decode step of the eager model (the compiled
    wrapper's original module) in the caller's autocast; untimed."""
    eager = getattr(model, "_orig_mod", model)
    prompt = workload.make_prompt(1, 1, seed=0).to(device.torch_device)
    with torch.no_grad():
        logits, cache = workload.prefill(eager, prompt, 2)
        token = logits.argmax(dim=-1)
        element = cache_element_size(cache)
        reads = weight_reads(lambda: workload.decode_step(eager, token, cache), eager,
                             casts_cached=casts_cached)
    return reads, element


def _kv_bytes(workload: GenerationWorkload, batch_size: int, positions: int, element_bytes: float) -> float:
    """The cache's bytes for ``positions`` at ``element_bytes`` a key or value element (the
    workload counts elements through its fp32 size: keys and values may differ in dtype)."""
    return workload.kv_cache_bytes(batch_size, positions, torch.float32) / 4 * element_bytes


def measure_generation(workload: GenerationWorkload, model: nn.Module, device: Device, *,
                       batch_size: int = 1, prompt_len: int, new_tokens: int,
                       rounds: int | StopRule = 3,
                       warmup_rounds: int = 1, seed: int = 0, window_tokens: int = WINDOW_TOKENS,
                       cache_dtype: torch.dtype | None = None, stream: bool = False,
                       casts_each_step: bool | None = None,
                       memory: MemoryTracker | None = None,
                       decode_model: nn.Module | None = None,
                       timed: AbstractContextManager[object] | None = None) -> GenerationFigures:
    """Time greedy generations of ``model`` (on ``device``, in eval mode, at its precision; an
    autocast or precision switch is the caller's, around this call, so one autocast context
    spans every round and its cast cache serves every eager step): ``rounds`` of them after
    ``warmup_rounds``, or under a time budget (a StopRule) until it stops them, after warm-up
    rounds until two agree (settle.py); the figures' ``stop_reason`` says why they stopped.

    ``cache_dtype``: the dtype of the cached keys and values (default: what the cache's tensors
    have, found on a one-token prefill). ``stream``: read each token to the host as it is made.
    ``casts_each_step``: weights autocast casts are cast on every step, not served from its
    cache (default: where ``model`` is compiled, whose graphs cast their parameter inputs; say
    False for a back end that runs eager ops, such as ``eager``). ``memory``: the case's memory
    tracker, told where the set-up (warm-up included) ends; without it the device's peak counter
    is reset there. ``decode_model``: what the decode steps run, where it is not ``model``
    (greedy_round). ``timed``: entered with the device idle just before the first timed round
    and exited right after the last (each round ends synchronised): the case's energy tracker,
    whose window holds exactly the timed rounds, not the warm-up nor the one-token byte count."""
    check_lengths(workload, batch_size, prompt_len, new_tokens)
    if window_tokens < 1:
        raise UsageError(f"window tokens must be at least 1 (not {window_tokens})")
    rule = (RoundRule(0, warmup_rounds, rounds) if isinstance(rounds, StopRule)
            else RoundRule(rounds, warmup_rounds))
    max_len = prompt_len + new_tokens
    if casts_each_step is None:
        casts_each_step = hasattr(model if decode_model is None else decode_model, "_orig_mod")
    with device.current():
        prompt = workload.make_prompt(batch_size, prompt_len, seed).to(device.torch_device)
        reads, element = _decode_reads(workload, model, device, casts_cached=not casts_each_step)
        if cache_dtype is not None or element is None:
            element = (cache_dtype or _parameter_dtype(model)).itemsize
        new_clock = clock_maker(device, new_tokens - 1, window_tokens, stream)
        warm: list[GenerationRound] = []
        while not rule.warmed_up([r.ttft_s + r.decode_s for r in warm]):
            warm.append(greedy_round(workload, model, prompt, new_tokens, new_clock(), stream,
                                     decode_model)[1])
        if memory is not None:
            memory.steady_state()
        else:
            device.reset_peak_memory()
        measured: list[GenerationRound] = []
        methods, first, reason = [], None, ""
        if timed is not None:
            device.synchronize()  # no warm-up (or byte count) work still queued in the window
        with timed if timed is not None else nullcontext():
            # Judged between rounds, so the rule's own time is in no round.
            while not (reason := rule.stop_reason(round_figures(measured, new_tokens - 1),
                                                  sum(r.ttft_s + r.decode_s for r in measured))):
                clock = new_clock()
                tokens, times = greedy_round(workload, model, prompt, new_tokens, clock, stream,
                                             decode_model)
                measured.append(times)
                methods.append(clock.method)
                first = tokens if first is None else first
        # A round whose events failed is timed differently: the record says so.
        method = next((m for m in methods if m.startswith(EVENTS_FAILED)), methods[0])
        peak = device.peak_memory_bytes()
    figures = GenerationFigures(
        batch_size=batch_size, prompt_len=prompt_len, new_tokens=new_tokens, timing_method=method,
        rounds=tuple(measured), warmup_rounds=len(warm), warmup=tuple(warm), stop_reason=reason,
        kv_cache_bytes=round(_kv_bytes(workload, batch_size, max_len, element)),
        weight_bytes_per_step=reads.total,
        cache_bytes_per_step=cache_bytes_read_per_step(_kv_bytes(workload, batch_size, 1, element),
                                                       prompt_len, new_tokens),
        peak_memory_bytes=peak, streamed=stream, weight_reads=reads.by_read,
        kv_element_bytes=element,
        tokens=tuple(tuple(row) for row in first.tolist()) if first is not None else ())
    windowed = any(r.windows for r in measured)
    return replace(figures, window_tokens=window_tokens) if windowed else figures


__all__ = ["EVENTS", "HOST", "STREAMED", "WINDOWS", "WINDOWS_NO_EVENTS", "GenerationFigures",
           "GenerationRound", "GenerationWorkload", "check_lengths", "greedy_round", "clock_maker",
           "measure_generation", "percentile"]
