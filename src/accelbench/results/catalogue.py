"""The figure catalogue: every figure accelbench prints, defined once.

Each :class:`Figure` names one figure (its key in JSON, bundles and exports), its unit, the one
statistic it is, how it was measured, the modes that have it, and the one function that reads it
from a case. The value is computed once, when the result is made (the timed loop's samples, the
generation rounds, the sustained series), by the function the entry names; every surface (the run
table and ``--wide``, ``--json``, ``history``, ``compare``, share bundles, CSV/Markdown export, the
site, the report and the notebook) reads it through :func:`case_figures` or the accessor the
entry points at, never recomputes it. ``docs``/the README's figure catalogue is this table
(``accelbench.results.catalogue.markdown_table()``), and a test holds every name to it.

Generation figures follow the field's definitions (MLPerf Inference, vLLM): TTFT, TPOT = the
median round's (end-to-end - TTFT) / (N - 1), ITL = the pooled per-token gaps, end-to-end latency
= TTFT + decode; the decode rates are 1 / TPOT per sequence and B / TPOT over the batch, output
tokens/s B x N / end-to-end (``measure/generation/rounds.GenerationFigures``).

A ``--protocol`` case's figures are also its peer's own (llama-bench's pp and tg, gpt-fast's
tokens/s, MLPerf Client's TTFT and 2nd+ token rate: ``measure/generation/protocols.py``), named as
the peer names them, timed by the peer's clock (a per-token read or the device's cadence), and its
rate (``headline``) is the one its peer publishes: what history, compare, bundles, peers and the
site read for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from accelbench.measure.loop.median_ci import NOISY_REL_IQR
from accelbench.results.figures import Energy, Flops
from accelbench.results.first_use import BreakEven, FirstUse
from accelbench.results.generation import Generation, ProtocolSection
from accelbench.results.stats import Summary
from accelbench.results.sustained import SustainedRecord
from accelbench.workloads.protocols import reported_figure


class CaseView(Protocol):
    """What the catalogue reads of a case (results/records.CaseResult, which reads its own rate
    and writes its figures through this module, so the catalogue names only what it reads)."""

    mode: str
    protocol: str
    new_tokens: int
    batch_size: int
    step_times: list[float]
    peak_memory_bytes: int | None
    setup_peak_memory_bytes: int | None
    generation: Generation | None
    sustained: SustainedRecord | None
    break_even: BreakEven | None
    flops: Flops | None
    energy: Energy | None

    def throughput(self) -> float | None: ...

    def tokens_per_s(self) -> float | None: ...

    def summary(self) -> Summary | None: ...

    def epoch_time(self) -> tuple[float, float, float, str] | None: ...

    def first_use(self) -> FirstUse: ...

    def input_fraction(self) -> float | None: ...


TRAIN_EVAL = ("train", "eval")
GENERATE = ("generate",)
ALL_MODES = ("train", "eval", "generate")


@dataclass(frozen=True)
class Figure:
    name: str
    #: Words for a column header or a sentence ("decode tokens/s").
    label: str
    unit: str
    #: The one statistic the figure is ("median over steps", "median over rounds" ...).
    statistic: str
    #: How it was measured, in a sentence.
    method: str
    modes: tuple[str, ...]
    read: Callable[[CaseView], Any]


def _number(value: Any) -> Any:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _field(record: type, name: str) -> str:
    """``name``, checked to be a field of ``record`` when the catalogue is defined."""
    if name not in {spec.name for spec in dataclasses.fields(record)}:
        raise AssertionError(f"{record.__name__} has no field {name!r}")
    return name


def _generation(name: str) -> Callable[[CaseView], Any]:
    """A figure of the case's ``generation`` section (results/generation.Generation)."""
    attribute = _field(Generation, name)

    def read(case: CaseView) -> Any:
        return _number(getattr(case.generation, attribute)) if case.generation else None
    return read


def _protocol(figure: str, name: str) -> Callable[[CaseView], Any]:
    """A --protocol figure, on a case whose protocol test reports it (workloads/protocols.py)."""
    attribute = _field(ProtocolSection, name)

    def read(case: CaseView) -> Any:
        section = case.generation.protocol if case.generation else None
        if section is None or section.figure != figure:
            return None
        return _number(getattr(section, attribute))
    return read


def _protocol_share(case: CaseView) -> Any:
    """gpt-fast's bandwidth achieved over the bandwidth the device measured (both stored)."""
    achieved = _protocol("decode", "bandwidth_bytes_per_s")(case)
    reference = _generation("bandwidth_reference_bytes_per_s")(case)
    return achieved / reference if achieved is not None and reference else None


def _sub(record: str, name: str) -> Callable[[CaseView], Any]:
    def read(case: CaseView) -> Any:
        section = getattr(case, record)
        return _number(getattr(section, name, None)) if section is not None else None
    return read


def _sustained(name: str, per_sample: bool) -> Callable[[CaseView], Any]:
    """A sustained figure; the rates in the case's own unit (the series counts steps, each of
    ``batch_size`` samples: ``render/steady.sustained_lines`` shows them so)."""
    def read(case: CaseView) -> Any:
        record = case.sustained
        value = getattr(record.figures, name, None) if record is not None else None
        return value * case.batch_size if per_sample and value is not None else value
    return read


def _first_use(name: str) -> Callable[[CaseView], Any]:
    def read(case: CaseView) -> Any:
        if not case.step_times:
            return None
        cost = getattr(case.first_use(), name, None)
        return getattr(cost, "seconds", cost) if cost is not None else None
    return read


def _epoch(case: CaseView) -> float | None:
    epoch = case.epoch_time()
    return epoch[0] if epoch else None


def _median_step(case: CaseView) -> float | None:
    summary = case.summary()
    return summary.median if summary else None


def _break_even(case: CaseView) -> Any:
    return case.break_even.steps if case.break_even is not None else None


_STEP_RATE = ("batch / the median step time of the timed steps (after warm-up, each step closed "
              "by a device synchronisation or timed in synchronised windows)")
#: A percentile of too few values is their maximum in disguise (measure/generation/settle.tail):
#: the stored figure is then the maximum, and the generation section's ``tail_statistics`` (which
#: every surface shows through :func:`max_of`) names it "max of N".
_MAX_OF = 'their maximum, shown as "max of N"'
_GEN = "greedy decoding with a KV cache; each timed round prefills a fresh cache, then decodes N - 1 steps"
#: The clocks a protocol's figure is read from (workloads/protocols.py ProtocolTest.clock).
_PER_TOKEN_READ = ("clock: per-token read (each token read to the host as it is made, the host clock "
                   "per token, on every device)")
_DEVICE_CADENCE = ("clock: device cadence (no token read between steps; timing events per token on "
                   "CUDA/XPU, the host clock on the CPU)")

FIGURES: tuple[Figure, ...] = (
    Figure("samples_per_s", "samples/s", "samples/s", "median over steps", _STEP_RATE, TRAIN_EVAL,
           lambda c: c.throughput() if c.mode != "generate" else None),
    Figure("tokens_per_s", "tokens/s", "tokens/s", "median over steps",
           "samples/s x tokens per sample (decoders' training and evaluation)", TRAIN_EVAL,
           lambda c: c.tokens_per_s() if c.mode != "generate" else None),
    Figure("median_step_s", "step", "s", "median over steps", "the timed steps' median", TRAIN_EVAL,
           _median_step),
    Figure("epoch_s", "epoch", "s", "measured epochs' mean, or mean step x steps per epoch",
           "whole epochs timed (--epochs), else projected from the mean step", TRAIN_EVAL, _epoch),
    Figure("decode_tokens_per_s_total", "decode tokens/s", "tokens/s", "B / median TPOT",
           f"{_GEN}; the tokens all B sequences decode per second (the case's headline rate)",
           GENERATE, _generation("decode_tokens_per_s_total")),
    Figure("decode_tokens_per_s", "decode tokens/s per sequence", "tokens/s", "1 / median TPOT",
           f"{_GEN}; one sequence's decode rate", GENERATE, _generation("decode_tokens_per_s")),
    Figure("prefill_tokens_per_s", "prefill tokens/s", "tokens/s", "B x P / median TTFT",
           f"{_GEN}; prompt tokens over the time to the first token", GENERATE,
           _generation("prefill_tokens_per_s")),
    Figure("e2e_s", "E2E latency", "s", "median over rounds",
           "end-to-end latency, a request's whole time: TTFT + the N - 1 decode steps (vLLM's "
           "benchmark_serving E2EL, MLPerf)", GENERATE, _generation("e2e_s")),
    Figure("output_tokens_per_s", "output tokens/s", "tokens/s", "B x N / median E2E latency",
           f"{_GEN}; every output token of the B sequences over the request's end-to-end latency "
           "(vLLM's output token throughput, one request at a time)", GENERATE,
           _generation("output_tokens_per_s")),
    Figure("ttft_s", "TTFT", "s", "median over rounds",
           "time to first token: prefill and the first token's argmax, host clock, one "
           "synchronisation", GENERATE, _generation("ttft_s")),
    Figure("ttft_p90_s", "TTFT p90", "s", f"90th percentile over rounds (below 10 rounds: {_MAX_OF})",
           "as TTFT", GENERATE, _generation("ttft_p90_s")),
    Figure("ttft_p99_s", "TTFT p99", "s", f"99th percentile over rounds (below 100 rounds: {_MAX_OF})",
           "as TTFT", GENERATE, _generation("ttft_p99_s")),
    Figure("tpot_s", "TPOT", "s", "median over rounds",
           "time per output token after the first: (end-to-end - TTFT) / (N - 1) of a round",
           GENERATE, _generation("tpot_s")),
    Figure("tpot_p99_s", "TPOT p99", "s", f"99th percentile over rounds (below 100 rounds: {_MAX_OF})",
           "as TPOT", GENERATE, _generation("tpot_p99_s")),
    Figure("round_spread", "round spread", "fraction", "interquartile range / median of the rounds' TPOT",
           f"how far the timed rounds disagree; above {NOISY_REL_IQR:.0%} the case is noisy, as a "
           "step case whose steps spread so", GENERATE, _generation("round_spread")),
    Figure("itl_p50_s", "ITL p50", "s", "median of the pooled per-token gaps",
           "inter-token latency: every decode step's own time, pooled over rounds (timing events "
           "on CUDA/XPU: the device's cadence; none under windows)", GENERATE,
           _generation("itl_median_s")),
    Figure("itl_p99_s", "ITL p99", "s", "99th percentile of the pooled per-token gaps (below 100 "
           f"gaps: {_MAX_OF})", "as ITL p50", GENERATE, _generation("itl_p99_s")),
    Figure("kv_cache_bytes", "KV cache", "bytes", "count", "keys and values of P + N positions, "
           "every layer, at the cache's dtype", GENERATE, _generation("kv_cache_bytes")),
    Figure("bytes_per_token", "read/token", "bytes", "count",
           "weights and the cache filled so far that one decode step reads", GENERATE,
           _generation("bytes_per_step")),
    Figure("decode_bandwidth_bytes_per_s", "decode bandwidth", "bytes/s", "read/token / TPOT",
           "bytes one decode step reads over the median TPOT", GENERATE,
           _generation("effective_bandwidth_bytes_per_s")),
    Figure("bandwidth_share", "% bandwidth", "fraction", "decode bandwidth / measured bandwidth",
           "against the device's measured copy bandwidth (roofline)", GENERATE,
           _generation("bandwidth_share")),
    Figure("decode_floor_s", "floor/token", "s", "read/token / measured bandwidth",
           "the least time a decode step can take: its bytes at the device's measured copy "
           "bandwidth (roofline's, else a copy measured for the run: bandwidth_reference_source)",
           GENERATE, _generation("decode_floor_s")),
    Figure("decode_floor_ratio", "TPOT / floor", "ratio", "median TPOT / floor",
           "above 3 the row is overhead-bound (host launches: Python, the dispatcher, a launch per "
           "kernel; decode_bound names the host CPU), else bandwidth-bound at 1 / ratio of the "
           "measured bandwidth", GENERATE, _generation("decode_floor_ratio")),
    Figure("weights_memory_bytes", "weights", "bytes", "count",
           "the model's parameters and buffers as held for generation, measured on its tensors (each "
           "storage once): packed weights, scales and zero points where quantized (int8-wo, int4-wo)",
           GENERATE, _generation("weights_memory_bytes")),
    Figure("pp_tokens_per_s", "pp tokens/s (llama-bench)", "tokens/s", "mean over repetitions",
           "--protocol llama-bench: pp512, B x P prompt tokens / the time to first token of each "
           "repetition (a tiny model's test scaled to its context says so); the rate of a pp case; "
           "clock: the host's, one synchronisation when the prompt is done (llama-bench "
           "synchronises once after the prompt)", GENERATE, _protocol("pp", "tokens_per_s")),
    Figure("pp_tokens_per_s_sd", "pp sd", "tokens/s", "sample standard deviation over repetitions",
           "as pp (llama-bench prints mean +- sd)", GENERATE, _protocol("pp", "tokens_per_s_sd")),
    Figure("tg_tokens_per_s", "tg tokens/s (llama-bench)", "tokens/s", "mean over repetitions",
           "--protocol llama-bench: tg128, B x N tokens / the whole generation from a one-token "
           "prompt (N one-token steps from an empty context); the rate of a tg case; "
           f"{_PER_TOKEN_READ}, as llama-bench synchronises after every token", GENERATE,
           _protocol("tg", "tokens_per_s")),
    Figure("tg_tokens_per_s_sd", "tg sd", "tokens/s", "sample standard deviation over repetitions",
           "as tg (llama-bench prints mean +- sd)", GENERATE, _protocol("tg", "tokens_per_s_sd")),
    Figure("gpt_fast_tokens_per_s", "tokens/s (gpt-fast)", "tokens/s", "mean over samples",
           "--protocol gpt-fast: batch 1, 6-token prompt, 200 new tokens / the whole generation "
           "(prefill included) of each sample, after a dropped first; the rate of a gpt-fast case; "
           f"{_DEVICE_CADENCE}, as gpt-fast synchronises once a generation", GENERATE,
           _protocol("decode", "tokens_per_s")),
    Figure("gpt_fast_bandwidth_bytes_per_s", "bandwidth achieved (gpt-fast)", "bytes/s",
           "weight bytes x mean tokens/s", "--protocol gpt-fast: the weight bytes one decode step "
           "reads (packed where quantized) x tokens/s", GENERATE,
           _protocol("decode", "bandwidth_bytes_per_s")),
    Figure("gpt_fast_bandwidth_share", "% bandwidth (gpt-fast)", "fraction",
           "bandwidth achieved / measured bandwidth", "--protocol gpt-fast: bandwidth achieved over "
           "the device's measured copy bandwidth (roofline), as compare --published reads it",
           GENERATE, _protocol_share),
    Figure("mlperf_ttft_s", "TTFT (MLPerf Client)", "s", "mean over iterations",
           "--protocol mlperf-client: one category's time to first token, the first token read to "
           "the host; the overall figure is mlperf_ttft_geomean_s", GENERATE,
           _protocol("category", "ttft_mean_s")),
    Figure("mlperf_token_rate", "2nd+ token rate (MLPerf Client)", "tokens/s",
           "1 / mean over iterations of (end - first token) / (N - 1)",
           "--protocol mlperf-client: one category's rate after the first token; the rate of a "
           f"category case; {_PER_TOKEN_READ}, as MLPerf Client receives each token as it streams; "
           "the overall figure is mlperf_token_rate_geomean", GENERATE,
           _protocol("category", "token_rate")),
    Figure("peak_memory_bytes", "peak mem", "bytes", "maximum",
           "the steady state's peak (see memory_source: allocator, RSS or sampled)", ALL_MODES,
           lambda c: c.peak_memory_bytes),
    Figure("setup_peak_memory_bytes", "set-up peak", "bytes", "maximum",
           "the peak over building the model and the warm-up (cuDNN's autotuning workspace, "
           "compilation), where the device could reset its peak counter after it", ALL_MODES,
           lambda c: c.setup_peak_memory_bytes),
    Figure("achieved_flops", "GFLOP/s", "FLOP/s", "FLOPs per sample x samples/s",
           "counted FLOPs of one sample (torch.utils.flop_counter) at the median step",
           TRAIN_EVAL, _sub("flops", "achieved_flops")),
    Figure("fraction_of_peak", "% peak", "fraction", "achieved / measured matrix-product peak",
           "against the burst peak of the case's precision (roofline)", TRAIN_EVAL,
           _sub("flops", "fraction_of_peak")),
    Figure("input_fraction", "input wait", "fraction", "sum over timed steps / measured time",
           "time the device waited for batches", TRAIN_EVAL, lambda c: c.input_fraction()),
    Figure("joules_per_step", "J/step", "J", "energy counter difference / steps",
           "over the measured steps (measure/trackers/energy.py names the source)", TRAIN_EVAL,
           _sub("energy", "joules_per_step")),
    Figure("joules_per_token", "J/token", "J", "energy counter difference / output tokens",
           "over the timed rounds only (not the warm-up): their energy / their B x N output tokens, "
           "the prefill's energy shared among them; the source (NVML, RAPL, powermetrics) in "
           "energy.source, or why there is none in energy.reason", GENERATE,
           _sub("energy", "joules_per_token")),
    Figure("joules_per_round", "J/round", "J", "energy counter difference / rounds",
           "as J/token: one whole generation's energy (prefill and N - 1 decode steps)", GENERATE,
           _sub("energy", "joules_per_round")),
    Figure("burst", "burst", "samples/s", "geometric mean of the first fifth's intervals",
           "--sustained: the run's own first fifth (at most its first minute)", TRAIN_EVAL,
           _sustained("burst", True)),
    Figure("sustained", "sustained", "samples/s", "geometric mean of the last half's intervals",
           "--sustained: the last half of the run", TRAIN_EVAL, _sustained("sustained", True)),
    Figure("sustained_ratio", "sustained / burst", "fraction", "ratio of the two geometric means",
           "with Welch's t interval on the logarithms", TRAIN_EVAL, _sustained("ratio", False)),
    Figure("time_to_first_step_s", "1st step", "s", "one measurement",
           "train, eval: from the model on the device to the first step's end; a generation case: "
           "its first whole generation (the first warm-up round: prefill and every decode step, "
           "torch.compile and first use included; none without a warm-up round), not its TTFT",
           ALL_MODES, lambda c: c.first_use().time_to_first_step_s if c.step_times else None),
    Figure("first_use_s", "first use", "s", "first step (or round) - median steady one",
           "what the first use of the device costs (uncompiled cases)", ALL_MODES,
           _first_use("first_use")),
    Figure("compile_s", "compile", "s", "warm-up - as many median steady steps (or rounds)",
           "compiled cases: what torch.compile cost", ALL_MODES, _first_use("compile")),
    Figure("break_even_steps", "break-even", "steps (generations for generation cases)",
           "charged compile time / median time saved per step (or generation)",
           "--compile BACKEND,none: when compiling pays for itself", ALL_MODES, _break_even),
)
BY_NAME: dict[str, Figure] = {figure.name: figure for figure in FIGURES}
assert len(BY_NAME) == len(FIGURES), "a figure name is defined twice"


def figure(name: str) -> Figure:
    return BY_NAME[name]


#: The rate a --protocol test's peer publishes, by what the test reports (ProtocolTest.figure).
PROTOCOL_HEADLINES = {"pp": "pp_tokens_per_s", "tg": "tg_tokens_per_s", "decode": "gpt_fast_tokens_per_s",
                      "category": "mlperf_token_rate"}


def headline(mode: str, protocol: str = "", new_tokens: int = 0) -> Figure:
    """The figure a case's "rate" is, from its comparability key: samples/s; a generation case's
    decode tokens/s over the batch; a --protocol case's the rate its peer publishes (llama-bench's
    pp or tg, gpt-fast's tokens/s, MLPerf Client's 2nd+ token rate), so a protocol case has one
    rate on every surface and a pp case (no decode step) has one at all."""
    if mode != "generate":
        return BY_NAME["samples_per_s"]
    kind = reported_figure(protocol, new_tokens) if protocol else None
    return BY_NAME[PROTOCOL_HEADLINES.get(kind or "", "decode_tokens_per_s_total")]


def case_headline(case: CaseView) -> Figure:
    return headline(case.mode, case.protocol, case.new_tokens)


def key_headline(key: Mapping[str, Any]) -> Figure:
    """The headline of a comparability key as a dict (a bundle line's, a stored config key)."""
    new_tokens = key.get("new_tokens")
    return headline(str(key.get("mode", "")), str(key.get("protocol") or ""),
                    new_tokens if isinstance(new_tokens, int) else 0)


@dataclass(frozen=True)
class AcrossCases:
    """A figure of several cases together (a protocol's overall score): computed once, when the
    run's cases are in, by the function ``computed_by`` names from the cases' stored figures, and
    stored in the run's record (``RunRecord.protocol_overall``), never on one case."""

    name: str
    label: str
    unit: str
    statistic: str
    method: str
    computed_by: str


ACROSS_CASES: tuple[AcrossCases, ...] = (
    AcrossCases("mlperf_ttft_geomean_s", "TTFT (MLPerf Client, overall)", "s",
                "geometric mean over the categories of mlperf_ttft_s",
                "--protocol mlperf-client: one per model, device, precision and compile, only where "
                "every category finished (MLPerf Client gives no overall score without them)",
                "results/protocol_summary.mlperf_client_overall"),
    AcrossCases("mlperf_token_rate_geomean", "2nd+ token rate (MLPerf Client, overall)", "tokens/s",
                "geometric mean over the categories of mlperf_token_rate", "as mlperf_ttft_geomean_s",
                "results/protocol_summary.mlperf_client_overall"),
)


def max_of(generation: Generation | None, name: str) -> str:
    """"max of 12" where a generation case's tail figure ``name`` (``ttft_p99_s`` ...) is the
    maximum of values too few for its percentile (the case's stored ``tail_statistics``), else ""
    (a result written before they were kept says nothing)."""
    stated = ((generation.tail_statistics if generation else None) or {}).get(name)
    return stated if isinstance(stated, str) and stated.startswith("max of ") else ""


def tail_label(generation: Generation | None, name: str) -> str:
    """A tail figure's name for this case: its label ("TTFT p99"), or "TTFT max of 12"."""
    label, stated = BY_NAME[name].label, max_of(generation, name)
    return f"{label.rsplit(' ', 1)[0]} {stated}" if stated else label


def case_figures(case: CaseView) -> dict[str, Any]:
    """Every catalogue figure of the case's mode, by name (None where the case has none): what
    ``--json``, bundles and exports carry."""
    return {f.name: f.read(case) for f in FIGURES if case.mode in f.modes}


def markdown_table() -> str:
    """The catalogue as the README/docs print it."""
    rows = ["| figure | unit | statistic | how it is measured | modes |", "|---|---|---|---|---|"]
    rows += [f"| `{f.name}` ({f.label}) | {f.unit} | {f.statistic} | {f.method} | "
             f"{', '.join(f.modes)} |" for f in FIGURES]
    rows += [f"| `{f.name}` ({f.label}) | {f.unit} | {f.statistic} | {f.method} | generate, across "
             "cases |" for f in ACROSS_CASES]
    return "\n".join(rows)
