"""The field's generation protocols as data (no torch): ``--protocol NAME`` sets a generation case's
shape, its rounds and the figures it reports exactly as the peer defines them, so a row can be
read beside what that peer publishes. The protocol's id is a field of the comparability key.

- ``llama-bench`` (llama.cpp ``tools/llama-bench``): ``pp512``, prefill tokens/s of a 512-token
  prompt, and ``tg128``, decode tokens/s of 128 tokens from an empty context, measured
  separately; 5 repetitions after a warm-up run, printed as mean +- sample standard deviation of
  the per-repetition rates. Here ``tg`` is a 1-token prompt then 127 decode steps: 128 tokens, each
  a one-token step through the model from an empty cache, timed end to end (llama-bench feeds
  random tokens, this run the greedy ones; the argmax is the only extra work).
- ``gpt-fast`` (pytorch-labs/gpt-fast ``generate.py``, PyTorch CI's ``benchmarks/gpt_fast``):
  batch 1, a 6-token prompt (CI's ``[1, 15043, 29892, 590, 1024, 338]``), 200 new tokens;
  tokens/s = new tokens / the whole generation's time (prefill included), the mean over 5 samples
  after a first, dropped one; "bandwidth achieved" = weight bytes x tokens/s (here: the bytes a
  decode step reads of the weights, at the packed size when quantized).
- ``mlperf-client`` (MLCommons MLPerf Client, its required categories): greedy, one warm-up and
  three iterations per category, time to first token and the "2nd+ token rate" (1 / the mean of
  (end - first token) / (n - 1)) per category, and the geometric mean over the categories. Its
  prompts are real texts; the lengths here are the nominal ones of its prompt files
  (``data/prompts/*/<category>``: content generation, creative writing, structured text, code
  analysis "2k", summarisation intermediate "4k") and the output is their ``max_length``, every
  token generated (end-of-sequence ignored).

A model whose context is shorter than a test's prompt + new tokens (the tiny sizes) runs the test
scaled down to fit, and says so: the test keeps its name with the lengths it ran
(``pp63 (pp512 scaled to fit a context of 64)``), never silently.

Each test is timed the way its peer observes a token (``ProtocolTest.reads_each_token``):
llama-bench's tg synchronises after every one-token ``llama_decode`` and MLPerf Client receives
each token on the host as it streams, so those tests read each token to the host as it is made
(the ``--stream`` clock, every device); gpt-fast queues its decode steps and synchronises once at
the end of the generation, and llama-bench's pp times the prompt's one batch, so those tests read
no token between steps (the device's cadence: timing events on CUDA and XPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.errors import UsageError, did_you_mean

#: The two ways a protocol's peer observes its tokens (ProtocolTest.clock; the result's protocol
#: section records which, and the figure catalogue says it for each protocol figure).
PER_TOKEN_READ = "per-token read"
DEVICE_CADENCE = "device cadence"


@dataclass(frozen=True)
class ProtocolTest:
    """One measured shape of a protocol."""

    #: The peer's name for it: "pp512", "tg128", "creative writing" ...
    name: str
    #: What it reports: "pp" (prefill rate), "tg" (generation rate), "decode" (gpt-fast's
    #: tokens/s), "category" (MLPerf Client's TTFT and 2nd+ token rate).
    figure: str
    prompt_len: int
    new_tokens: int
    #: Set when the model's context made the test smaller: the name it was scaled from.
    scaled_from: str = ""
    #: The peer observes each token on the host as it is made (a per-token read), not only the
    #: generation's end: the case is timed by the streamed clock (measure/generation/generation_clocks.py).
    reads_each_token: bool = False

    @property
    def clock(self) -> str:
        """The clock the test's figures are read from, in the catalogue's words."""
        return PER_TOKEN_READ if self.reads_each_token else DEVICE_CADENCE

    @property
    def label(self) -> str:
        if not self.scaled_from:
            return self.name
        # pp63 names its lengths; a category keeps its name, so the lengths are said beside it.
        name = self.name if self.name != self.scaled_from else \
            f"{self.name} {self.prompt_len}+{self.new_tokens}"
        return f"{name} ({self.scaled_from} scaled to fit the model's context)"


@dataclass(frozen=True)
class Protocol:
    name: str
    description: str
    source: str
    tests: tuple[ProtocolTest, ...]
    #: Timed rounds (repetitions, samples, iterations) and warm-up rounds, as the peer runs them.
    rounds: int
    warmup_rounds: int = 1
    #: The fewest new tokens a test may be scaled to (a 2nd+ token rate needs two).
    min_new_tokens: int = 1
    #: The peer's execution recipe as a --compile value, applied where --compile is not given
    #: ("" = the peer runs eager, or accelbench's default).
    compile: str = ""


PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("llama-bench", "llama.cpp's llama-bench: pp512 and tg128, mean +- sd over 5 repetitions",
             "https://github.com/ggml-org/llama.cpp/tree/master/tools/llama-bench",
             (ProtocolTest("pp512", "pp", 512, 1),
              ProtocolTest("tg128", "tg", 1, 128, reads_each_token=True)), rounds=5),
    Protocol("gpt-fast", "gpt-fast / PyTorch CI: batch 1, 6-token prompt, 200 new tokens, tokens/s and "
             "bandwidth achieved, mean over 5 samples after a dropped first",
             "https://github.com/pytorch/pytorch/blob/main/benchmarks/gpt_fast/generate.py",
             (ProtocolTest("gpt-fast", "decode", 6, 200),), rounds=5,
             # generate.py: decode_one_token = torch.compile(mode="reduce-overhead",
             # fullgraph=True), a static cache, the prefill eager (without --compile_prefill).
             compile="inductor:reduce-overhead"),
    Protocol("mlperf-client", "MLPerf Client: 5 categories, greedy, 1 warm-up + 3 iterations, TTFT and "
             "2nd+ token rate per category, geometric mean over the categories",
             "https://github.com/mlcommons/mlperf_client",
             (ProtocolTest("content generation", "category", 128, 256, reads_each_token=True),
              ProtocolTest("creative writing", "category", 512, 512, reads_each_token=True),
              ProtocolTest("structured text", "category", 1024, 256, reads_each_token=True),
              ProtocolTest("code analysis", "category", 2048, 128, reads_each_token=True),
              ProtocolTest("summarisation, intermediate", "category", 4096, 128,
                           reads_each_token=True)),
             rounds=3, min_new_tokens=2),
)}
PROTOCOL_NAMES: tuple[str, ...] = tuple(PROTOCOLS)


def protocol(name: str) -> Protocol:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise UsageError(f"--protocol {name!r} is unknown{did_you_mean(name, PROTOCOL_NAMES)}; "
                         f"allowed: {', '.join(PROTOCOL_NAMES)}") from None


def _scaled_name(test: ProtocolTest, prompt: int, new: int) -> str:
    if test.figure == "pp":
        return f"pp{prompt}"
    if test.figure == "tg":
        return f"tg{new}"
    return test.name


def fitted_tests(name: str, context: int) -> tuple[ProtocolTest, ...]:
    """The protocol's tests for a model of ``context`` positions: each as defined where it fits,
    else scaled by one factor (prompt and new tokens alike) to fit, at least one prompt token and
    the protocol's fewest new tokens, and named for what it ran."""
    chosen = protocol(name)
    fitted: list[ProtocolTest] = []
    for test in chosen.tests:
        total = test.prompt_len + test.new_tokens
        if total <= context:
            fitted.append(test)
            continue
        if context < 1 + chosen.min_new_tokens:
            raise UsageError(f"--protocol {name}: a context of {context} tokens holds no test of it")
        factor = context / total
        new = max(chosen.min_new_tokens, int(test.new_tokens * factor))
        prompt = max(1, min(int(test.prompt_len * factor), context - new))
        # Two tests scaled to the same lengths would be one case: each keeps a shape of its own.
        while prompt > 1 and any((t.prompt_len, t.new_tokens) == (prompt, new) for t in fitted):
            prompt -= 1
        fitted.append(ProtocolTest(_scaled_name(test, prompt, new), test.figure, prompt, new, test.name,
                                   test.reads_each_token))
    return tuple(fitted)


def protocol_test_for(name: str, context: int, prompt_len: int, new_tokens: int) -> ProtocolTest | None:
    """The test of protocol ``name`` that a case of these lengths runs (None: no such test)."""
    return next((t for t in fitted_tests(name, context)
                 if (t.prompt_len, t.new_tokens) == (prompt_len, new_tokens)), None)


def reads_each_token(name: str, new_tokens: int) -> bool:
    """Whether a case of protocol ``name`` (none: "") with ``new_tokens`` new tokens is timed
    reading each token to the host, as its peer observes it (ProtocolTest.reads_each_token)."""
    kind = reported_figure(name, new_tokens) if name else None
    return kind is not None and any(t.reads_each_token for t in PROTOCOLS[name].tests if t.figure == kind)


def reported_figure(name: str, new_tokens: int) -> str | None:
    """What a test of protocol ``name`` with ``new_tokens`` new tokens reports (ProtocolTest.figure),
    from the comparability key alone (a test keeps its kind when scaled): llama-bench's pp makes
    one token, its tg more. None for a protocol this version does not know."""
    chosen = PROTOCOLS.get(name)
    if chosen is None:
        return None
    kinds = [t.figure for t in chosen.tests if (t.new_tokens == 1) == (new_tokens <= 1)]
    return (kinds or [chosen.tests[0].figure])[0]
