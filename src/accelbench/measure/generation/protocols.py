"""A generation case's figures as the field's protocols define them (``--protocol``;
workloads/protocols.py holds the shapes), and MLPerf Inference's latency budget, computed once
from the timed rounds when the result is made. The figure catalogue (results/catalogue.py) names
each; every surface reads the stored value.

- llama-bench: ``pp`` = B x P / TTFT per repetition (the prompt's prefill; llama-bench times the
  prompt's decode and nothing else); ``tg`` = B x N / the whole generation (a one-token prompt
  and N - 1 decode steps: N single-token steps from an empty context); each printed as the mean
  and the sample standard deviation of the per-repetition rates (llama-bench's ``avg_ts`` and
  ``stdev_ts``).
- gpt-fast: tokens/s = B x N / the whole generation (prefill included) per sample, the mean over
  samples; "bandwidth achieved" = the weight bytes a decode step reads x that rate (gpt-fast
  multiplies its model's bytes, parameters and buffers outside the embedding, by it).
- MLPerf Client, per category: TTFT, the mean over iterations; the "2nd+ token rate" = 1 / the
  mean over iterations of (end - first token) / (N - 1). The overall figures (the geometric means
  over the categories) are across cases: results/protocol_summary.py.
- Each test's clock is its peer's (workloads/protocols.py ``ProtocolTest.clock``): "per-token read"
  (llama-bench's tg, MLPerf Client: each token read to the host as it is made) or "device cadence"
  (gpt-fast, llama-bench's pp: no read between steps; timing events on CUDA and XPU). The section
  records it beside the rounds' own ``timing_method``.
- MLPerf Inference's interactive scenario for Llama-3.1-8B (LoadGen, v5.1): TTFT p99 within
  500 ms and TPOT p99 within 30 ms. Judged on a case whose model has Llama-3.1-8B's shape, with
  TTFT p99 across rounds and TPOT p99 across rounds (each round one sequence's TPOT).
"""

from __future__ import annotations

import statistics
from typing import Any

from accelbench.measure.generation.rounds import GenerationFigures
from accelbench.workloads.protocols import ProtocolTest


def _mean_sd(values: list[float]) -> tuple[float, float | None]:
    """The mean and the sample standard deviation (n - 1; None for one value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def protocol_figures(name: str, test: ProtocolTest, figures: GenerationFigures) -> dict[str, Any]:
    """The ``protocol`` section of a generation result: which test of which protocol the case
    ran (scaled or not) and its figures as that protocol defines them."""
    batch, prompt, new = figures.batch_size, figures.prompt_len, figures.new_tokens
    out: dict[str, Any] = {"name": name, "test": test.name, "label": test.label,
                           "figure": test.figure, "scaled_from": test.scaled_from or None,
                           "rounds": len(figures.rounds), "clock": test.clock,
                           "timing_method": figures.timing_method}
    whole = [r.ttft_s + r.decode_s for r in figures.rounds]
    if test.figure == "pp":
        rates = [batch * prompt / r.ttft_s for r in figures.rounds]
    elif test.figure in ("tg", "decode"):
        rates = [batch * new / seconds for seconds in whole]
    else:
        rates = []
    if rates:
        mean, sd = _mean_sd(rates)
        out.update(tokens_per_s=mean, tokens_per_s_sd=sd, samples_tokens_per_s=rates)
    if test.figure == "decode":
        out["bandwidth_bytes_per_s"] = figures.weight_bytes_per_step * out["tokens_per_s"] / batch
        out["bandwidth_counted"] = ("weight bytes one decode step reads (packed where quantized) x "
                                    "tokens/s per sequence")
    if test.figure == "category":
        out["ttft_mean_s"] = statistics.fmean(r.ttft_s for r in figures.rounds)
        if figures.decode_steps:
            out["token_rate"] = 1.0 / statistics.fmean(r.decode_s / figures.decode_steps
                                                       for r in figures.rounds)
    return out


# --- MLPerf Inference's interactive budget ----------------------------------------------------
#: meta-llama/Llama-3.1-8B's config.json: the shape MLPerf Inference's budget is set for.
LLAMA_3_1_8B = {"layers": 32, "width": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
                "vocab": 128256}
#: MLPerf Inference (v5.1) Llama-3.1-8B, interactive scenario: 99th percentiles.
INTERACTIVE_TTFT_S, INTERACTIVE_TPOT_S = 0.5, 0.030
INTERACTIVE_SOURCE = ("MLPerf Inference v5.1 rules, Llama-3.1-8B interactive: TTFT p99 <= 500 ms, "
                      "TPOT p99 <= 30 ms")


def interactive_budget(shape: dict[str, int] | None, figures: GenerationFigures) -> dict[str, Any] | None:
    """Whether a case of a Llama-3.1-8B-shaped model meets MLPerf Inference's interactive budget;
    None for any other shape (the budget is set for that model only)."""
    if shape is None or any(shape.get(k) != v for k, v in LLAMA_3_1_8B.items()):
        return None
    ttft, tpot = figures.ttft_percentile_s(99), figures.tpot_percentile_s(99)
    meets_ttft = ttft <= INTERACTIVE_TTFT_S
    meets_tpot = tpot is not None and tpot <= INTERACTIVE_TPOT_S
    return {"shape": "Llama-3.1-8B", "ttft_p99_s": ttft, "tpot_p99_s": tpot,
            "ttft_budget_s": INTERACTIVE_TTFT_S, "tpot_budget_s": INTERACTIVE_TPOT_S,
            "meets": meets_ttft and meets_tpot, "meets_ttft": meets_ttft, "meets_tpot": meets_tpot,
            "rounds": len(figures.rounds), "source": INTERACTIVE_SOURCE}

