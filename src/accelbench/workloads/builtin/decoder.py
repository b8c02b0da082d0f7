"""A decoder-only transformer in plain ``torch.nn``, after nanoGPT's ``model.py`` and gpt-fast's
``model.py``: GPT-2's layout (LayerNorm, GELU MLP, learned positions) or Llama's (RMSNorm, SwiGLU,
rotary positions, grouped-query attention), chosen by :class:`DecoderConfig`'s fields.

Attention goes through ``F.scaled_dot_product_attention``. For generation the model has a static
key/value cache (gpt-fast's design): every layer's keys and values live in buffers of a fixed
``max_len``, written at index positions, and a decode step attends over the whole buffer under a
mask, so no shape grows with each token (what CUDA graphs and ``torch.compile`` need).
:func:`greedy_generate` is the plain generation loop over that API, the yardstick a benchmark
holds accelbench's generation figures against.
"""

from __future__ import annotations

import contextlib
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

#: ``enable_gqa`` reads grouped key/value heads in place; torch 2.6's MPS attention rejects it, so
#: that release repeats the heads instead (a version check: every device takes the same path).
SDPA_GQA = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 7)


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3's stretch of the rotary frequencies (``rope_type: llama3`` in its config): wavelengths
    longer than ``original_context / low_freq_factor`` are divided by ``factor``, shorter than
    ``original_context / high_freq_factor`` kept, those between interpolated."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_context: int


@dataclass(frozen=True)
class DecoderConfig:
    vocab: int
    #: The longest sequence: the learned position table's size, or the context a rotary model
    #: states (its cos/sin tables are this long).
    context: int
    layers: int
    width: int
    heads: int
    #: Key/value heads: ``heads`` for multi-head attention, fewer for grouped-query attention.
    kv_heads: int
    #: The MLP's hidden width.
    ffn: int
    #: "gpt2": LayerNorm, GELU MLP, learned positions; "llama": RMSNorm, SwiGLU, rotary positions.
    layout: str = "gpt2"
    bias: bool = False
    dropout: float = 0.0
    norm_eps: float = 1e-5
    rope_theta: float = 10_000.0
    rope_scaling: RopeScaling | None = None
    #: How the random weights are drawn (the same distributions either way: N(0, 0.02), the
    #: projections into the residual stream N(0, 0.02 / sqrt(2 layers)), norms at one, biases at
    #: zero). "sequential", nanoGPT's: every module's default init, then each matrix drawn again
    #: in module order from torch's global generator, the residual projections a third time (2.3
    #: draws a weight kept, one after another). "parallel": each matrix drawn once, in chunks of
    #: INIT_CHUNK elements from generators of their own seeded from one draw of the global one, on
    #: torch's intra-op threads (the same weights for any thread count): what a 1.24B model
    #: affords. Changing a preset's is a new version of its workload (other weights).
    init: str = "sequential"

    def __post_init__(self) -> None:
        if self.layout not in ("gpt2", "llama"):
            raise ValueError(f"layout must be 'gpt2' or 'llama', not {self.layout!r}")
        if self.init not in ("sequential", "parallel"):
            raise ValueError(f"init must be 'sequential' or 'parallel', not {self.init!r}")
        if self.width % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"width {self.width} must split into {self.heads} heads, and those "
                             f"into {self.kv_heads} key/value groups")

    @property
    def head_dim(self) -> int:
        return self.width // self.heads


def rope_frequencies(config: DecoderConfig) -> torch.Tensor:
    """Inverse frequencies of the rotary embedding (head_dim / 2 of them), in float64."""
    dim = config.head_dim
    inv_freq = config.rope_theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    scaling = config.rope_scaling
    if scaling is None:
        return inv_freq
    # Transformers' _compute_llama3_parameters, the reference for Llama 3.x checkpoints.
    wavelength = 2 * math.pi / inv_freq
    low_wavelength = scaling.original_context / scaling.low_freq_factor
    high_wavelength = scaling.original_context / scaling.high_freq_factor
    scaled = torch.where(wavelength > low_wavelength, inv_freq / scaling.factor, inv_freq)
    smooth = ((scaling.original_context / wavelength - scaling.low_freq_factor)
              / (scaling.high_freq_factor - scaling.low_freq_factor))
    smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    between = (wavelength >= high_wavelength) & (wavelength <= low_wavelength)
    return torch.where(between, smoothed, scaled)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions in the rotate-half form (Hugging Face's Llama): x is (B, H, T, D), cos and
    sin (T, D / 2)."""
    first, second = x.chunk(2, dim=-1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


class KVCache:
    """Every layer's keys and values in static buffers of shape (B, kv_heads, max_len, head_dim).

    A layer's buffers are allocated at its first write (the prefill), so they take the device and
    dtype its keys come in (autocast's, under an amp precision). ``length`` counts the positions
    filled on the host, so checking room for a token needs no device sync; ``position`` holds the
    same count on the device, for the index a decode step writes at (a tensor, so a compiled decode
    step sees one graph for every position). The model's forward reads only ``decoding`` (a
    switch, set once the prompt is in), never ``length``: a compiled forward that read the count
    would be specialised on it and recompiled at every token.
    """

    def __init__(self, layers: int, max_len: int, static: bool = False) -> None:
        self.max_len = max_len
        self.keys: list[torch.Tensor | None] = [None] * layers
        self.values: list[torch.Tensor | None] = [None] * layers
        self.length = 0
        self.decoding = False
        self.position: torch.Tensor | None = None
        self.slots: torch.Tensor | None = None
        #: Kept for every generation (:meth:`Decoder.keep_cache`): its tensors are marked static
        #: addresses for torch.compile, so a CUDA graph that writes them is captured and replayed
        #: (inductor skips graphs whose mutated inputs are not static).
        self.static = static

    def layer(self, index: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch, kv_heads, _, head_dim = like.shape
        shape = (batch, kv_heads, self.max_len, head_dim)
        kept = self.keys[index]
        if kept is None or kept.shape != shape or kept.dtype != like.dtype or kept.device != like.device:
            self.keys[index] = self._buffer(torch.zeros(shape, dtype=like.dtype, device=like.device))
            self.values[index] = self._buffer(torch.zeros(shape, dtype=like.dtype, device=like.device))
        keys, values = self.keys[index], self.values[index]
        assert keys is not None and values is not None
        return keys, values

    def _buffer(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.static:
            import torch._dynamo

            # Unguarded: a new address re-records the graph instead of recompiling it (torch
            # 2.6's keyword; a release without it guards by default, and a kept cache keeps its
            # address anyway).
            try:
                torch._dynamo.mark_static_address(tensor, guard=False)
            except TypeError:
                torch._dynamo.mark_static_address(tensor)
        return tensor

    def start(self, length: int, device: torch.device) -> None:
        """The prompt's ``length`` positions are in: decode from there. A kept cache keeps its
        position and slot tensors (their addresses are in the captured graphs) and refills them."""
        self.length, self.decoding = length, True
        if self.slots is None or self.slots.device != device:
            self.slots = self._buffer(torch.arange(self.max_len, device=device))
        if self.position is None or self.position.device != device:
            self.position = self._buffer(torch.full((1,), length, dtype=torch.long, device=device))
        else:
            self.position.fill_(length)

    def reset(self) -> None:
        """Empty again for the next prefill; its tensors stay where they are (stale keys past
        the position are masked, as gpt-fast's kept caches are)."""
        self.length, self.decoding = 0, False

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values) if t is not None)


def kv_cache_bytes(config: DecoderConfig, batch_size: int, max_len: int, dtype: torch.dtype) -> int:
    """Bytes of a full cache: keys and values, every layer, every key/value head."""
    itemsize = torch.empty((), dtype=dtype, device="meta").element_size()
    return 2 * config.layers * batch_size * config.kv_heads * max_len * config.head_dim * itemsize


class CausalSelfAttention(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = config.heads, config.kv_heads, config.head_dim
        # One product for queries, keys and values (nanoGPT's c_attn); Llama's separate q/k/v
        # projections have the same parameters.
        self.qkv = nn.Linear(config.width, (config.heads + 2 * config.kv_heads) * config.head_dim,
                             bias=config.bias)
        self.proj = nn.Linear(config.width, config.width, bias=config.bias)
        #: The attention-probability dropout, a float as parity's check expects (it turns it off).
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
                cache: KVCache | None, index: int) -> torch.Tensor:
        batch, length, _ = x.shape
        q, k, v = self.qkv(x).split([self.heads * self.head_dim, self.kv_heads * self.head_dim,
                                     self.kv_heads * self.head_dim], dim=-1)
        q = q.view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        if rope is not None:
            q, k = rotate(q, *rope), rotate(k, *rope)
        mask = None
        if cache is not None:
            keys, values = cache.layer(index, k)
            if cache.decoding:  # one token at cache.position: the whole static buffer, masked
                assert cache.position is not None and cache.slots is not None
                keys.index_copy_(2, cache.position, k)
                values.index_copy_(2, cache.position, v)
                k, v, mask = keys, values, (cache.slots <= cache.position).view(1, 1, 1, -1)
            else:  # prefill from position 0: causal attention over the prompt's own keys
                keys[:, :, :length] = k
                values[:, :, :length] = v
        y = self._attend(q, k, v, mask)
        y = y.transpose(1, 2).reshape(batch, length, self.heads * self.head_dim)
        return self.resid_dropout(self.proj(y))

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                mask: torch.Tensor | None) -> torch.Tensor:
        grouped = self.kv_heads != self.heads
        if grouped and not SDPA_GQA:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        extra = {"enable_gqa": True} if grouped and SDPA_GQA else {}
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None and q.shape[2] > 1,
            dropout_p=self.dropout if self.training else 0.0, **extra)


class MLP(nn.Module):
    """GPT-2's GELU MLP, or Llama's SwiGLU (down(silu(gate(x)) * up(x)))."""

    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.swiglu = config.layout == "llama"
        self.up = nn.Linear(config.width, config.ffn, bias=config.bias)
        self.gate = nn.Linear(config.width, config.ffn, bias=config.bias) if self.swiglu else None
        self.down = nn.Linear(config.ffn, config.width, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = F.silu(self.gate(x)) * self.up(x) if self.gate is not None else F.gelu(self.up(x))
        return self.dropout(self.down(hidden))


def _norm(config: DecoderConfig) -> nn.Module:
    if config.layout == "llama":
        return nn.RMSNorm(config.width, eps=config.norm_eps)
    return nn.LayerNorm(config.width, eps=config.norm_eps, bias=config.bias)


class Block(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.attn_norm = _norm(config)
        self.attn = CausalSelfAttention(config)
        self.mlp_norm = _norm(config)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
                cache: KVCache | None, index: int) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), rope, cache, index)
        return x + self.mlp(self.mlp_norm(x))


#: The projections into the residual stream, drawn with GPT-2's scaled std (nanoGPT).
RESIDUAL_PROJECTIONS = ("attn.proj.weight", "mlp.down.weight")
#: Elements a parallel init draws from one generator: a matrix is split into such chunks, so the
#: largest (llama-1b's token table, a fifth of its weights) is not one thread's alone.
INIT_CHUNK = 1 << 22


def draw_in_parallel(model: nn.Module, layers: int) -> None:
    """``DecoderConfig.init == "parallel"``: the norms at one and biases at zero, then every
    matrix drawn once, N(0, 0.02) (the residual projections N(0, 0.02 / sqrt(2 layers))), each
    chunk of INIT_CHUNK elements from a generator of its own seeded from one draw of torch's
    global generator (so ``torch.manual_seed`` fixes them), the chunks spread over torch's
    intra-op threads: the same weights whatever the thread count."""
    for module in model.modules():
        if isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            module.reset_parameters()
        elif isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    base = int(torch.randint(0, 2**32, (1,)).item())
    jobs: list[tuple[torch.Tensor, float, int]] = []
    for index, (name, parameter) in enumerate(model.named_parameters()):
        if parameter.dim() < 2:
            continue
        std = 0.02 / math.sqrt(2 * layers) if name.endswith(RESIDUAL_PROJECTIONS) else 0.02
        flat = parameter.detach().view(-1)
        for chunk, start in enumerate(range(0, flat.numel(), INIT_CHUNK)):
            # mt19937 is seeded from 32 bits: index x 65537 + chunk keeps every chunk's apart.
            jobs.append((flat[start:start + INIT_CHUNK], std, (base + index * 65_537 + chunk) % 2**32))

    def draw(job: tuple[torch.Tensor, float, int]) -> None:
        part, std, seed = job
        part.normal_(0.0, std, generator=torch.Generator(part.device).manual_seed(seed))

    with ThreadPoolExecutor(max(1, min(torch.get_num_threads(), len(jobs)))) as pool:
        list(pool.map(draw, jobs))


class Decoder(nn.Module):
    """Token ids in, next-token logits out. ``forward`` without a cache is training's (every
    position); with a :class:`KVCache` it is generation's, which :func:`prefill` and
    :func:`decode` (and the methods of the same names) call. Generation goes through ``forward``
    so that ``torch.compile(model)`` compiles it too: a compiled module's other methods are the
    original module's, uncompiled."""

    # Llama's rotary tables, registered as buffers (nn.Module's attribute lookup finds them).
    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.config = config
        parallel, device = config.init == "parallel", torch.get_default_device()
        # Drawn in parallel, the modules are made without their default init: on the meta device,
        # then given storage where they would have been made (nothing is drawn twice).
        with torch.device("meta") if parallel else contextlib.nullcontext():
            self.tokens = nn.Embedding(config.vocab, config.width)
            self.positions = (nn.Embedding(config.context, config.width) if config.layout == "gpt2"
                              else None)
            self.dropout = nn.Dropout(config.dropout)
            self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
            self.norm = _norm(config)
        if parallel and device.type != "meta":
            self.to_empty(device=device)
        # The output layer is the token embedding (tied, as GPT-2 and Llama 3.2 1B), read in
        # head(): one parameter, not two names for one, which a move to a device that replaces
        # parameters (a tensor subclass, XLA) would split in two. A weight-only quantizer gives
        # it a module of its own (untie_output), the packed copy the head then reads.
        self.output: nn.Module | None = None
        #: After keep_cache(): every generation of a length reuses one cache instead of a new one.
        self.keeps_cache = False
        self.kept_caches: dict[int, KVCache] = {}
        if config.layout == "llama":
            angles = torch.outer(torch.arange(config.context, dtype=torch.float64),
                                 rope_frequencies(config))
            # Tables, not frequencies: a model cast to bf16 rounds each cos/sin by at most 2^-9,
            # where rounded frequencies would turn far positions' angles by whole radians.
            self.register_buffer("rope_cos", angles.cos().float(), persistent=False)
            self.register_buffer("rope_sin", angles.sin().float(), persistent=False)
        if parallel:
            if device.type != "meta":  # counted on the meta device (facts): nothing to draw
                draw_in_parallel(self, config.layers)
            return
        self.apply(self._init)
        for name, parameter in self.named_parameters():
            if name.endswith(RESIDUAL_PROJECTIONS):
                # GPT-2's scaled init of the projections into the residual stream (nanoGPT).
                nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * config.layers))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.output is not None:
            return self.output(hidden)
        return F.linear(hidden, self.tokens.weight)

    def untie_output(self) -> nn.Linear:
        """The output layer as an ``nn.Linear`` of its own that reads the token table, for a
        quantizer to replace with its packed form (the embedding keeps the table for its row
        lookups): every linear layer is then quantized alike."""
        output = nn.Linear(self.config.width, self.config.vocab, bias=False,
                           device=self.tokens.weight.device, dtype=self.tokens.weight.dtype)
        output.weight = self.tokens.weight
        self.output = output
        return output

    def _hidden(self, ids: torch.Tensor, positions: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        x = self.tokens(ids)
        rope = None
        if self.positions is not None:
            x = x + self.positions(positions)
        else:
            rope = (self.rope_cos[positions], self.rope_sin[positions])
        x = self.dropout(x)
        for index, block in enumerate(self.blocks):
            x = block(x, rope, cache, index)
        return self.norm(x)

    def forward(self, ids: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Without ``cache``: logits (B, T, vocab) for every position of ``ids`` (B, T). With one:
        the tensor work of a generation step (the host's bookkeeping is :func:`prefill`'s and
        :func:`decode`'s): the prompt written from position 0 of an empty cache, or one token per
        sequence (B, 1) at ``cache.position`` once ``cache.decoding``; the logits (B, vocab) of
        the last position, the only one that goes through the output layer."""
        if cache is None:
            _check_length(ids.shape[1], self.config.context)
            positions = torch.arange(ids.shape[1], device=ids.device)
            return self.head(self._hidden(ids, positions, None))
        if cache.decoding:
            assert cache.position is not None
            hidden = self._hidden(ids, cache.position, cache)
            cache.position += 1
        else:
            hidden = self._hidden(ids, torch.arange(ids.shape[1], device=ids.device), cache)
        return self.head(hidden[:, -1])

    def new_cache(self, max_len: int) -> KVCache:
        """An empty cache for ``max_len`` positions: a new one, or after :meth:`keep_cache` the
        kept one, emptied (a new one where ``max_len`` differs)."""
        _check_length(max_len, self.config.context)
        if not self.keeps_cache:
            return KVCache(self.config.layers, max_len)
        # One kept cache per length: a short look at the model (the byte count's one-token step)
        # leaves the case's own cache, and the addresses captured in its graphs, where they are.
        kept = self.kept_caches.setdefault(max_len, KVCache(self.config.layers, max_len, static=True))
        kept.reset()
        return kept

    @property
    def kept_cache(self) -> KVCache | None:
        """The longest kept cache (the case's own), None before keep_cache()."""
        return self.kept_caches[max(self.kept_caches)] if self.kept_caches else None

    def keep_cache(self) -> None:
        """From now on every generation reuses one cache, allocated at the first prefill and
        emptied for each next one (gpt-fast's ``setup_caches``): its tensors keep their
        addresses, so a decode step captured as a CUDA graph replays on them."""
        self.keeps_cache = True

    def prefill(self, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """:func:`prefill` through this module (its forward, as the module is)."""
        return prefill(self, ids, cache)

    def decode(self, tokens: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """:func:`decode` through this module (its forward, as the module is)."""
        return decode(self, tokens, cache)



def original(model: nn.Module) -> Decoder:
    """The :class:`Decoder` that ``model`` is, or that it wraps when compiled (``_orig_mod``)."""
    return cast(Decoder, getattr(model, "_orig_mod", model))


def _check_length(length: int, limit: int) -> None:
    if not 0 < length <= limit:
        raise ValueError(f"{length} positions do not fit: this model/cache holds 1 to {limit}")


def prefill(model: nn.Module, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Fill an empty ``cache`` with the prompt ``ids`` (B, P) through ``model`` (a
    :class:`Decoder` or its compiled module: its forward runs); the logits (B, vocab) of the
    prompt's last position."""
    length = ids.shape[1]
    if cache.length:
        raise ValueError("prefill needs an empty cache")
    _check_length(length, cache.max_len)
    logits = model(ids, cache)
    cache.start(length, ids.device)
    return logits


def decode(model: nn.Module, tokens: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """One token per sequence (B,) at the cache's next position through ``model`` (as
    :func:`prefill`); its logits (B, vocab). The cache is updated in place."""
    if not cache.length:
        raise ValueError("decode needs a cache filled by prefill")
    _check_length(cache.length + 1, cache.max_len)
    logits = model(tokens.view(-1, 1), cache)
    cache.length += 1
    return logits


@torch.no_grad()
def greedy_generate(model: nn.Module, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """The plain greedy KV-cache loop: prefill the prompt (B, P), then one decode step per further
    token, always the most likely one, end-of-sequence ignored. The prefill's logits give the first
    new token, so ``new_tokens`` tokens take ``new_tokens - 1`` decode steps (as gpt-fast's
    ``generate``). ``model`` is a :class:`Decoder` or its compiled module. Returns the new tokens
    (B, new_tokens)."""
    cache = original(model).new_cache(prompt.shape[1] + new_tokens)
    token = prefill(model, prompt, cache).argmax(dim=-1)
    generated = [token]
    for _ in range(new_tokens - 1):
        token = decode(model, token, cache).argmax(dim=-1)
        generated.append(token)
    return torch.stack(generated, dim=1)
