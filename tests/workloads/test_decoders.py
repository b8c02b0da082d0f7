"""The decoder workloads (nanogpt-char, gpt2, llama-1b): published sizes on the meta device,
the generation API against recomputing every step, the static KV cache, and the architecture
against Hugging Face's own models with the same weights."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from torch import nn

from accelbench.workloads import get_workload_class
from accelbench.workloads.base import GENERATION, Workload, WorkloadContractError, check_contract, generates
from accelbench.workloads.builtin.decoder import Decoder, DecoderConfig, greedy_generate, rope_frequencies
from accelbench.workloads.builtin.language_model import DecoderLM
from accelbench.workloads.facts import model_facts

DECODERS = ("nanogpt-char", "gpt2", "llama-1b")


#: Decoder steps are small: torch's two intra-op threads would wait on each other (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(name: str, std: float = 0.5) -> tuple[DecoderLM, Decoder]:
    """A tiny model in eval mode whose matrices are large enough that its greedy tokens vary:
    at the training init (std 0.02) the tied head mostly echoes the last token, which a broken
    cache would echo too."""
    workload = get_workload_class(name)("tiny")
    assert isinstance(workload, DecoderLM)
    torch.manual_seed(0)
    model = workload.build_model()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                parameter.normal_(0.0, std)
    assert isinstance(model, Decoder)
    return workload, model.eval()


# --- published sizes ---------------------------------------------------------------------------
#: Published parameter counts (../shared/reference/published-results.md), exactly: nanoGPT prints
#: 10.65M without its position embeddings; GPT-2 small's 124.4M (Hugging Face) counts them;
#: Llama-3.2-1B has none. Tied embeddings count once.
PUBLISHED = {"nanogpt-char": (10_646_784, "10.65 M"), "gpt2": (124_439_808, "124.4 M"),
             "llama-1b": (1_235_814_400, "1.24 B")}


@pytest.mark.parametrize("name", DECODERS)
def test_published_parameter_counts(name: str) -> None:
    exact, published = PUBLISHED[name]
    facts = model_facts(name)  # what `accelbench list` shows, counted on the meta device
    assert facts.parameters == exact
    figure, unit = published.split()
    decimals = len(figure.split(".")[1])
    assert f"{exact / (1e9 if unit == 'B' else 1e6):.{decimals}f}" == figure  # the published digits
    assert facts.counted_on == "meta" and facts.count_error is None


def test_position_embeddings_and_tied_weights_are_counted_as_published() -> None:
    counts = {}
    for name in ("nanogpt-char", "gpt2"):
        workload = get_workload_class(name)()
        with torch.device("meta"):
            model = workload.build_model()
        every = sum(p.numel() for p in model.parameters())
        assert len(list(model.parameters())) == len(model.state_dict())  # one output/input matrix
        counts[name] = (workload.count_parameters(model), every, model.positions.weight.numel())
    assert counts["nanogpt-char"] == (10_646_784, 10_646_784 + 256 * 384, 256 * 384)
    assert counts["gpt2"][0] == counts["gpt2"][1]  # 124.4M includes its 1024 x 768 positions


def test_the_tie_survives_a_move_that_replaces_parameters() -> None:
    """Moving a module to a device whose tensors are a subclass (or with torch's
    overwrite-on-conversion switch) makes new Parameter objects: two names for one parameter
    would become two parameters, trained apart."""
    from accelbench.data.options import DataOptions

    workload = get_workload_class("gpt2")("tiny")
    torch.manual_seed(0)
    model = workload.build_model()
    batch = next(iter(workload.make_batches("train", 2, DataOptions())))
    kept = copy.deepcopy(model).double()
    previous = torch.__future__.get_overwrite_module_params_on_conversion()
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        replaced = copy.deepcopy(model).double()
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(previous)
    losses = []
    for trained in (kept, replaced):
        optimizer = workload.make_optimizer(trained)
        losses.append([])
        for _ in range(3):
            loss = workload.training_loss(trained, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses[-1].append(loss.item())
    assert losses[0] == losses[1]


def hand_forward_flops(vocab: int, context: int, layers: int, width: int, kv_width: int, ffn: int,
                       gated: bool) -> float:
    """Multiply-adds x 2 of one sequence: projections, MLP, attention's two products over the
    full square (the counter does not halve causal attention), the output layer."""
    per_token = layers * (width * (width + 2 * kv_width) + width * width + (3 if gated else 2) * width * ffn)
    attention = layers * 2 * context * context * width
    return 2.0 * (context * (per_token + width * vocab) + attention)


def test_published_flops_match_a_hand_count_and_tokens_per_sample() -> None:
    shapes = {"nanogpt-char": (65, 256, 6, 384, 384, 1536, False),
              "gpt2": (50257, 1024, 12, 768, 768, 3072, False),
              "llama-1b": (128256, 1024, 16, 2048, 512, 8192, True)}
    for name, shape in shapes.items():
        facts = model_facts(name)
        assert facts.forward_flops_per_sample == pytest.approx(hand_forward_flops(*shape), rel=1e-3)
        assert 2.9 < facts.flops_per_sample["train"] / facts.forward_flops_per_sample < 3.01
        assert facts.tokens_per_sample == {"train": shape[1], "eval": shape[1]}
        assert json.loads(json.dumps(facts.to_dict()))["tokens_per_sample"]["train"] == shape[1]
    assert model_facts("gpt2").forward_flops_per_sample == pytest.approx(291.65e9, rel=1e-3)
    assert model_facts("mnist").tokens_per_sample == {}  # not a language model


def test_published_set_ups() -> None:
    nano, gpt2, llama = (get_workload_class(name)() for name in DECODERS)
    assert (nano.batch_size("train"), nano.tokens_per_sample("train")) == (64, 256)
    assert (gpt2.batch_size("train"), gpt2.tokens_per_sample("train")) == (12, 1024)
    assert (llama.batch_size("train"), llama.tokens_per_sample("train")) == (8, 1024)
    config = llama.preset.model
    assert (config.heads, config.kv_heads, config.head_dim, config.rope_theta) == (32, 8, 64, 500_000.0)
    assert nano.preset.model.dropout == 0.2 and not nano.preset.model.bias and gpt2.preset.model.bias
    with torch.device("meta"):
        optimizer = gpt2.make_optimizer(gpt2.build_model())
    decay, plain = optimizer.param_groups
    assert (decay["weight_decay"], plain["weight_decay"]) == (0.1, 0.0)
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() == 1 for p in plain["params"])
    assert (decay["lr"], decay["betas"]) == (6e-4, (0.9, 0.95))


def test_tiny_batches_are_next_token_pairs_from_the_seed() -> None:
    from accelbench.data.options import DataOptions

    workload = get_workload_class("gpt2")("tiny")
    first = next(iter(workload.make_batches("train", 3, DataOptions(seed=5))))
    again = next(iter(workload.make_batches("train", 3, DataOptions(seed=5))))
    ids, targets = first
    assert ids.shape == targets.shape == (3, 32) and ids.dtype == torch.long
    assert torch.equal(ids[:, 1:], targets[:, :-1])  # targets are the inputs shifted by one
    assert torch.equal(ids, again[0])
    assert int(ids.max()) < workload.preset.model.vocab


# --- generation ----------------------------------------------------------------------------
def recomputed_greedy(model: Decoder, prompt: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, list]:
    """Greedy tokens with no cache: the whole sequence through forward() for every token."""
    sequence, tokens, logits = prompt, [], []
    with torch.no_grad():
        for _ in range(new_tokens):
            last = model(sequence)[:, -1]
            logits.append(last)
            tokens.append(last.argmax(dim=-1))
            sequence = torch.cat([sequence, tokens[-1][:, None]], dim=1)
    return torch.stack(tokens, dim=1), logits


@pytest.mark.parametrize("name", DECODERS)
def test_kv_cache_generation_equals_recomputing_every_step(name: str) -> None:
    workload, model = tiny_model(name)
    prompt = workload.make_prompt(2, 5, seed=0)
    new_tokens = 12
    expected, expected_logits = recomputed_greedy(model, prompt, new_tokens)
    assert len(set(expected.flatten().tolist())) >= 5  # the tokens vary: the test can see a bad cache

    assert torch.equal(greedy_generate(model, prompt, new_tokens), expected)

    # The same through the workload's generation contract, logits and all.
    with torch.no_grad():
        logits, cache = workload.prefill(model, prompt, prompt.shape[1] + new_tokens)
        tokens = [logits.argmax(dim=-1)]
        torch.testing.assert_close(logits, expected_logits[0], rtol=1e-4, atol=1e-4)
        for step in range(1, new_tokens):
            logits, cache = workload.decode_step(model, tokens[-1], cache)
            torch.testing.assert_close(logits, expected_logits[step], rtol=1e-4, atol=1e-4)
            tokens.append(logits.argmax(dim=-1))
    assert torch.equal(torch.stack(tokens, dim=1), expected)
    assert cache.length == prompt.shape[1] + new_tokens - 1


@pytest.mark.parametrize("name", DECODERS)
def test_the_cache_is_static_and_its_bytes_are_declared(name: str) -> None:
    workload, model = tiny_model(name)
    prompt = workload.make_prompt(3, 4, seed=1)
    with torch.no_grad():
        logits, cache = workload.prefill(model, prompt, 10)
        pointers = [t.data_ptr() for t in cache.keys]
        shapes = [t.shape for t in cache.keys]
        for _ in range(3):
            logits, cache = workload.decode_step(model, logits.argmax(dim=-1), cache)
    assert [t.data_ptr() for t in cache.keys] == pointers and [t.shape for t in cache.keys] == shapes
    config = workload.preset.model
    assert shapes[0] == (3, config.kv_heads, 10, config.head_dim)
    assert cache.nbytes() == workload.kv_cache_bytes(3, 10, torch.float32)
    assert cache.nbytes() == 2 * config.layers * 3 * config.kv_heads * 10 * config.head_dim * 4
    # A bf16 model's cache holds bf16 keys and values: half the bytes.
    with torch.no_grad():
        _, half = workload.prefill(model.to(torch.bfloat16), prompt, 10)
    assert half.keys[0].dtype == torch.bfloat16
    assert half.nbytes() == workload.kv_cache_bytes(3, 10, torch.bfloat16) == cache.nbytes() // 2


def test_torch_2_6s_repeated_key_value_heads_give_the_same_logits(monkeypatch) -> None:
    import accelbench.workloads.builtin.decoder as decoder

    workload, model = tiny_model("llama-1b")
    assert model.config.kv_heads < model.config.heads
    prompt = workload.make_prompt(2, 6, seed=2)
    monkeypatch.setattr(decoder, "SDPA_GQA", True)
    with torch.no_grad():
        grouped = (model(prompt), greedy_generate(model, prompt, 6))
    monkeypatch.setattr(decoder, "SDPA_GQA", False)
    with torch.no_grad():
        repeated = (model(prompt), greedy_generate(model, prompt, 6))
    torch.testing.assert_close(repeated[0], grouped[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(repeated[1], grouped[1])


def test_published_kv_cache_bytes() -> None:
    # Llama-3.2-1B, bf16, one sequence of 1024: 16 layers x 8 heads x 64 x 2 (K and V) x 2 bytes.
    llama = get_workload_class("llama-1b")()
    assert llama.kv_cache_bytes(1, 1024, torch.bfloat16) == 32 * 1024 * 1024
    assert get_workload_class("gpt2")().kv_cache_bytes(1, 1024, torch.float32) == 2 * 12 * 768 * 1024 * 4


def test_generation_refuses_what_does_not_fit() -> None:
    workload, model = tiny_model("gpt2")
    context = workload.context_length()
    assert context == 64
    with pytest.raises(ValueError, match="do not fit"):
        model(torch.zeros(1, context + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="do not fit"):
        workload.prefill(model, torch.zeros(1, 4, dtype=torch.long), context + 1)
    with pytest.raises(ValueError, match="do not fit"):
        workload.prefill(model, torch.zeros(1, 6, dtype=torch.long), 5)
    with torch.no_grad():
        logits, cache = workload.prefill(model, torch.zeros(1, 4, dtype=torch.long), 5)
        logits, cache = workload.decode_step(model, logits.argmax(dim=-1), cache)  # position 5 of 5
        with pytest.raises(ValueError, match="do not fit"):
            workload.decode_step(model, logits.argmax(dim=-1), cache)


def test_the_generation_contract_is_optional_but_whole() -> None:
    assert all(generates(get_workload_class(name)) for name in DECODERS)
    assert not generates(get_workload_class("mnist"))

    class HalfDecoder(Workload):
        name = "half-decoder"
        modes = ("eval",)
        default_batch_size = {"eval": 1}
        dataset_size = {"eval": 1}

        def build_model(self) -> nn.Module:
            return nn.Identity()

        def make_batches(self, mode, batch_size, options):
            return []

        def eval_step(self, model, batch):
            return torch.zeros(())

        def prefill(self, model, prompt, max_len):
            return prompt, None

    with pytest.raises(WorkloadContractError) as error:
        check_contract(HalfDecoder)
    missing = [m for m in GENERATION if m != "prefill"]
    assert all(f"{m} (to generate)" in str(error.value) for m in missing)


# --- the architecture, against Hugging Face's models with the same weights ---------------------
def test_rope_scaling_is_llama3s() -> None:
    rope_utils = pytest.importorskip("transformers.modeling_rope_utils")
    transformers = pytest.importorskip("transformers")
    config = get_workload_class("llama-1b")().preset.model
    hf = transformers.LlamaConfig(hidden_size=2048, num_attention_heads=32, head_dim=64,
                                  max_position_embeddings=131072, rope_theta=500000.0,
                                  rope_scaling={"rope_type": "llama3", "factor": 32.0,
                                                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                "original_max_position_embeddings": 8192})
    inv_freq, _ = rope_utils.ROPE_INIT_FUNCTIONS["llama3"](hf, "cpu")
    ours = rope_frequencies(config)
    torch.testing.assert_close(ours.float(), inv_freq.float(), rtol=1e-6, atol=0)
    unscaled = 500000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    assert (ours < unscaled).any() and torch.equal(ours[:4], unscaled[:4])  # long waves stretched


def test_the_parallel_init_draws_each_weight_once_the_same_for_any_thread_count(monkeypatch) -> None:
    """llama-1b's published weights (DecoderConfig.init "parallel", its version 2): the same
    distributions as the sequential init, fixed by torch.manual_seed whatever the thread count,
    each chunk from a generator of its own; the tiny size and the other decoders keep the
    sequential init their shipped reference tokens were made with; counted on the meta device,
    nothing is drawn."""
    from accelbench.workloads.builtin import decoder

    monkeypatch.setattr(decoder, "INIT_CHUNK", 1000)  # several chunks a matrix, here
    config = DecoderConfig(vocab=512, context=64, layers=2, width=64, heads=4, kv_heads=2, ffn=192,
                           layout="llama", init="parallel")

    def build(threads: int, seed: int = 0) -> Decoder:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            torch.manual_seed(seed)
            return Decoder(config)
        finally:
            torch.set_num_threads(before)

    one, three = build(1), build(3)
    for (name, a), (_, b) in zip(one.state_dict().items(), three.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert not torch.equal(build(1, seed=1).tokens.weight, one.tokens.weight)
    sequential = Decoder(DecoderConfig(**{**config.__dict__, "init": "sequential"}))
    assert not torch.equal(sequential.tokens.weight, one.tokens.weight)
    for name, parameter in one.named_parameters():
        if parameter.dim() < 2:
            assert torch.equal(parameter, torch.ones_like(parameter)), name  # the norms' gains
            continue
        scaled = name.endswith(decoder.RESIDUAL_PROJECTIONS)
        assert parameter.std().item() == pytest.approx(0.02 / (2 if scaled else 1), rel=0.1), name
    chunks = one.tokens.weight.detach().view(-1).split(1000)
    assert not torch.equal(chunks[0], chunks[1])  # each chunk its own stream
    torch.testing.assert_close(one.rope_cos, sequential.rope_cos)
    with torch.device("meta"):
        assert Decoder(config).tokens.weight.is_meta
    assert get_workload_class("llama-1b")("published").preset.model.init == "parallel"
    assert {get_workload_class(name)(size).preset.model.init for name in DECODERS
            for size in ("tiny", "published") if (name, size) != ("llama-1b", "published")} == {"sequential"}
    with pytest.raises(ValueError, match="init must be"):
        DecoderConfig(**{**config.__dict__, "init": "fast"})


def _copy_llama(ours: Decoder, config: DecoderConfig, hf: nn.Module) -> None:
    q, kv = config.heads * config.head_dim, config.kv_heads * config.head_dim
    state = {"model.embed_tokens.weight": ours.tokens.weight, "model.norm.weight": ours.norm.weight,
             "lm_head.weight": ours.tokens.weight}
    for i, block in enumerate(ours.blocks):
        prefix = f"model.layers.{i}."
        wq, wk, wv = block.attn.qkv.weight.split([q, kv, kv])
        state |= {prefix + "self_attn.q_proj.weight": wq, prefix + "self_attn.k_proj.weight": wk,
                  prefix + "self_attn.v_proj.weight": wv,
                  prefix + "self_attn.o_proj.weight": block.attn.proj.weight,
                  prefix + "mlp.gate_proj.weight": block.mlp.gate.weight,
                  prefix + "mlp.up_proj.weight": block.mlp.up.weight,
                  prefix + "mlp.down_proj.weight": block.mlp.down.weight,
                  prefix + "input_layernorm.weight": block.attn_norm.weight,
                  prefix + "post_attention_layernorm.weight": block.mlp_norm.weight}
    _load(hf, state)


def _load(hf: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Every weight of ``hf`` replaced by ours (none left at its own random init)."""
    result = hf.load_state_dict(state, strict=False)
    assert not result.unexpected_keys
    assert set(result.missing_keys) <= {name for name, _ in hf.named_buffers()}


def _copy_gpt2(ours: Decoder, hf: nn.Module) -> None:
    state = {"transformer.wte.weight": ours.tokens.weight, "transformer.wpe.weight": ours.positions.weight,
             "transformer.ln_f.weight": ours.norm.weight, "transformer.ln_f.bias": ours.norm.bias,
             "lm_head.weight": ours.tokens.weight}
    for i, block in enumerate(ours.blocks):
        prefix = f"transformer.h.{i}."
        # GPT-2's Conv1D keeps (in, out) weights: ours transposed.
        for theirs, module in (("attn.c_attn", block.attn.qkv), ("attn.c_proj", block.attn.proj),
                               ("mlp.c_fc", block.mlp.up), ("mlp.c_proj", block.mlp.down)):
            state |= {prefix + theirs + ".weight": module.weight.T, prefix + theirs + ".bias": module.bias}
        for theirs, norm in (("ln_1", block.attn_norm), ("ln_2", block.mlp_norm)):
            state |= {prefix + theirs + ".weight": norm.weight, prefix + theirs + ".bias": norm.bias}
    _load(hf, state)


@pytest.mark.parametrize("name", ["gpt2", "llama-1b"])
def test_the_architecture_matches_hugging_faces(name: str) -> None:
    transformers = pytest.importorskip("transformers")
    workload, ours = tiny_model(name, std=0.2)
    with torch.no_grad():
        for norm in (m for m in ours.modules() if isinstance(m, (nn.LayerNorm, nn.RMSNorm))):
            norm.weight.normal_(1.0, 0.2)  # not all ones: a misplaced norm shows
            if getattr(norm, "bias", None) is not None:
                norm.bias.normal_(0.0, 0.2)
    c = workload.preset.model
    if name == "gpt2":
        # nanoGPT's exact GELU, where GPT-2's checkpoint used the tanh approximation.
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=c.vocab, n_positions=c.context, n_embd=c.width, n_layer=c.layers, n_head=c.heads,
            n_inner=c.ffn, activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            layer_norm_epsilon=c.norm_eps))
        _copy_gpt2(ours, hf)
    else:
        scaling = c.rope_scaling
        hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=c.vocab, hidden_size=c.width, intermediate_size=c.ffn, num_hidden_layers=c.layers,
            num_attention_heads=c.heads, num_key_value_heads=c.kv_heads, head_dim=c.head_dim,
            max_position_embeddings=c.context, rms_norm_eps=c.norm_eps, tie_word_embeddings=True,
            rope_theta=c.rope_theta,  # the transformers 4 spelling, which 5 still reads
            rope_scaling={"rope_type": "llama3", "factor": scaling.factor,
                          "low_freq_factor": scaling.low_freq_factor,
                          "high_freq_factor": scaling.high_freq_factor,
                          "original_max_position_embeddings": scaling.original_context}))
        _copy_llama(ours, c, hf)
    hf.eval()
    ids = workload.make_prompt(2, c.context, seed=3)[:, :40]
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(input_ids=ids).logits, rtol=1e-4, atol=1e-4)


# --- end to end ------------------------------------------------------------------------------
def test_the_three_run_tiny_through_accelbench_run(inline_cli, tmp_path) -> None:
    out = tmp_path / "run.json"
    done = inline_cli("run", *DECODERS, "--size", "tiny", "--steps", "3", "--device", "cpu",
                      "--isolation", "none", "--quiet", "-o", str(out))
    assert done.returncode == 0, done.stderr
    cases = json.loads(out.read_text())["cases"]
    expected = [(name, mode) for name in DECODERS for mode in ("train", "eval")]
    assert [(c["workload"], c["mode"]) for c in cases] == expected
    for case in cases:
        assert case["status"] == "ok" and len(case["step_times"]) == 3, case
        counted = model_facts(case["workload"], "tiny").flops_per_sample[case["mode"]]
        assert case["flops"]["per_sample"] == counted  # FLOPs counted on meta reach the case
