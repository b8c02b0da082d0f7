"""llama-1b-shaped decode in bf16 and int8-wo: accelbench against a plain loop, PyTorch's own gpt-fast
benchmark and transformers' ``generate()`` (issue 28; target: accelbench within 3% of the plain loop).

Every contender generates from the same 6-token prompt (PyTorch CI's gpt-fast prompt length) the
same number of new tokens, batch 1, on a Llama-3.2-1B-shaped model (2048 wide, 16 layers, 32 query
and 8 key/value heads, SwiGLU 8192, vocabulary 128256; ``--layers`` takes fewer of its layers) with
random weights, in bfloat16 or int8 weight-only. Each figure is gpt-fast's: new tokens / the whole
generation (prefill included), so the four read the same work:

- ``plain``:      accelbench's decoder (workloads/builtin/decoder.py) in the loop a user writes by hand
                  (``greedy_generate``), int8-wo through accelbench's quantizer (PyTorch's
                  ``_weight_int8pack_mm``);
- ``accelbench``: ``measure_generation`` on that model (what a generate case runs);
- ``gpt_fast``:   PyTorch's ``benchmarks/gpt_fast`` (``--gpt-fast-dir``: a copy of that folder of
                  the pytorch repository, not shipped here): its ``model.Transformer`` at the same
                  shape with random weights as its ``_load_model`` makes them, its ``generate()``
                  as CI calls it (top-k 200 sampling at temperature 0.8, eager unless ``--compile``),
                  int8 through its ``WeightOnlyInt8QuantHandler`` (``F.linear(x, w.to(x.dtype)) *
                  scales``);
- ``generate``:   transformers' ``LlamaForCausalLM`` of the same shape, ``generate(max_new_tokens=N,
                  min_new_tokens=N, do_sample=False)``; int8-wo through accelbench's quantizer.

Each in a fresh process per round, ``--threads 1`` by default, the order rotating every round; per
process the median over ``--repeats`` generations after a warm-up one, by the wall clock and by the
process's CPU time (``time.process_time``: on a machine shared with other work, one thread's CPU
time is what it computed, where the wall clock also holds the time other processes had the core).
Ratios per round, geometric mean with a 90% t interval (benchmarks/isolation.py); "within 3%" is
that interval inside 0.97-1.03. The load average is recorded each round: the machine is shared.

    .venv/bin/python benchmarks/quantized_decode.py --gpt-fast-dir /tmp/gpt_fast --precision bf16
    .venv/bin/python benchmarks/quantized_decode.py --gpt-fast-dir /tmp/gpt_fast --precision int8-wo
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

from generation import PINNED_MALLOC  # benchmarks/ is this script's path
from isolation import interleaved_rounds, log_ratio_interval, within_margin

PROMPT_LEN = 6
WIDTH, HEADS, KV_HEADS, FFN, VOCAB, ROPE_THETA = 2048, 32, 8, 8192, 128_256, 500_000.0


def _median_rate(times: list[tuple[float, float]], new_tokens: int) -> dict[str, Any]:
    """Per generation (wall seconds, CPU seconds of this process): tokens/s by either clock."""
    wall, cpu = [t[0] for t in times], [t[1] for t in times]
    return {"seconds": wall, "cpu_seconds": cpu, "tokens_per_s": new_tokens / statistics.median(wall),
            "cpu_tokens_per_s": new_tokens / statistics.median(cpu)}


def _device(args: argparse.Namespace) -> Any:
    from accelbench.devices import DeviceSet

    return DeviceSet.current().select(args.device)[0]


def _timed(generate_once: Any, repeats: int, device: Any = None) -> list[tuple[float, float]]:
    """Each generation between the device's synchronisations (gpt-fast's timing: one sync when
    the generation is done), the first a warm-up (compilation, graph capture)."""
    import torch

    times = []
    with torch.no_grad():
        for repeat in range(1 + repeats):
            if device is not None:
                device.synchronize()
            start, cpu = time.perf_counter(), time.process_time()
            generate_once()
            if device is not None:
                device.synchronize()
            if repeat:  # the first is the warm-up
                times.append((time.perf_counter() - start, time.process_time() - cpu))
    return times


def _accelbench_model(args: argparse.Namespace) -> tuple[Any, Any]:
    from dataclasses import replace

    import torch

    from accelbench.workloads.builtin.decoder import Decoder
    from accelbench.workloads.builtin.llama import Llama1B

    # llama-1b's own shape (--size tiny: its tiny one, a check that the script runs), a 4096
    # context, --layers of its layers.
    workload = Llama1B(args.size)
    config = replace(workload.preset.model, context=min(workload.preset.model.context, 4096),
                     layers=args.layers)
    torch.manual_seed(0)
    model = Decoder(config).to(torch.bfloat16).eval().to(_device(args).torch_device)
    _quantize(model, args)
    workload.preset = type(workload.preset)(batch_size=workload.preset.batch_size,  # type: ignore[call-arg]
                                            dataset_size=workload.preset.dataset_size,
                                            seq_len=min(1024, config.context), model=config)
    return workload, model


def _quantize(model: Any, args: argparse.Namespace) -> None:
    """accelbench's quantizer, as a generate case calls it: under inductor, int8 in the form it
    fuses (gpt-fast's WeightOnlyInt8Linear), else PyTorch's kernels."""
    if args.precision in ("int8-wo", "int4-wo"):
        from accelbench.measure.generation.quantize import quantize_weights

        quantize_weights(model, args.precision, _device(args), fused=args.recipe.startswith("inductor"))


def _plain_decode(model: Any, recipe: str) -> Any:
    """gpt-fast's recipe written out by hand: one cache kept for every generation, the decode step
    compiled fullgraph in the recipe's mode (generate.py's decode_one_token), the prefill eager."""
    import torch

    if not recipe:
        return model
    model.keep_cache()
    backend, _, mode = recipe.partition(":")
    if backend == "inductor":  # generate.py sets it for every compiled run
        import torch._inductor.config

        torch._inductor.config.coordinate_descent_tuning = True
    return torch.compile(model, backend=backend, mode=mode or None, fullgraph=True)


def plain_generate(model: Any, decoder: Any, prompt: Any, new_tokens: int) -> Any:
    """The loop a user writes by hand: prefill, argmax, then one decode step per token through
    ``decoder`` (the compiled decode step, or the model), the tokens kept on the device."""
    import torch

    from accelbench.workloads.builtin.decoder import decode, prefill

    cache = model.new_cache(prompt.shape[1] + new_tokens)
    token = prefill(model, prompt, cache).argmax(dim=-1)
    generated = [token]
    for _ in range(new_tokens - 1):
        token = decode(decoder, token, cache).argmax(dim=-1)
        generated.append(token)
    return torch.stack(generated, dim=1)


def plain_child(args: argparse.Namespace) -> dict[str, Any]:
    workload, model = _accelbench_model(args)
    decoder = _plain_decode(model, args.recipe)
    prompt = workload.make_prompt(1, PROMPT_LEN, 0).to(_device(args).torch_device)
    return _median_rate(_timed(lambda: plain_generate(model, decoder, prompt, args.new_tokens),
                               args.repeats, _device(args)), args.new_tokens)


def accelbench_child(args: argparse.Namespace) -> dict[str, Any]:
    """A generate case's rounds: the execution recipe (measure/generation/recipe.py) and
    ``greedy_round`` under the case's clock, as ``measure_generation`` runs them (its byte
    count's one-token step before the rounds is left out of both clocks); the wall time is the
    round's own, TTFT + decode."""
    import torch

    from accelbench.measure.generation.recipe import prepare_generation
    from accelbench.measure.generation.rounds import clock_maker, greedy_round

    workload, model = _accelbench_model(args)
    device = _device(args)
    runner = prepare_generation(model, args.recipe, device, workload, "llama-1b")
    prompt = workload.make_prompt(1, PROMPT_LEN, 0).to(device.torch_device)
    new_clock = clock_maker(device, args.new_tokens - 1)
    times = []
    with torch.no_grad(), runner.settings():
        for repeat in range(1 + args.repeats):
            cpu = time.process_time()
            _, timed = greedy_round(workload, runner.prefill, prompt, args.new_tokens, new_clock(),
                                    decode_model=runner.decode)
            if repeat:
                times.append((timed.ttft_s + timed.decode_s, time.process_time() - cpu))
    result = _median_rate(times, args.new_tokens)
    result["execution"] = runner.finish().to_dict()
    return result


def gpt_fast_child(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    # Its generate.py imports torchao and the Mixtral model at the top; only LLaMA runs here.
    for name in ("torchao", "mixtral_moe_model", "mixtral_moe_quantize", "benchmark"):
        sys.modules.setdefault(name, types.ModuleType(name))
    for name, attributes in (("mixtral_moe_model", ("ConditionalFeedForward", "Transformer")),
                             ("mixtral_moe_quantize", ("ConditionalFeedForwardInt8",
                                                       "WeightOnlyInt8QuantHandler"))):
        for attribute in attributes:
            setattr(sys.modules[name], attribute, type(attribute, (), {}))
    sys.path.insert(0, str(args.gpt_fast_dir))
    import generate as gpt_fast  # type: ignore[import-not-found]
    from model import ModelArgs, Transformer  # type: ignore[import-not-found]
    from quantize import WeightOnlyInt8QuantHandler  # type: ignore[import-not-found]

    config = ModelArgs(block_size=4096, vocab_size=VOCAB, n_layer=args.layers, n_head=HEADS, dim=WIDTH,
                       intermediate_size=FFN, n_local_heads=KV_HEADS, rope_base=ROPE_THETA)
    # Its _load_model: built on the meta device, cast, quantized, then random weights assigned.
    with torch.device("meta"):
        model = Transformer(config)
    model = model.to(dtype=torch.bfloat16)
    if args.precision == "int8-wo":
        model = WeightOnlyInt8QuantHandler(model).convert_for_runtime()
    torch.manual_seed(0)
    state = {k: torch.nn.Parameter(torch.randn(v.shape).to(dtype=v.dtype), requires_grad=v.requires_grad)
             for k, v in model.state_dict().items()}
    model.load_state_dict(state, assign=True)
    model.eval()
    if args.compile:
        gpt_fast.decode_one_token = torch.compile(gpt_fast.decode_one_token, fullgraph=True)
        gpt_fast.prefill = torch.compile(gpt_fast.prefill, fullgraph=True)
    prompt = torch.tensor([1, 15043, 29892, 590, 1024, 338], dtype=torch.int32)

    def once() -> None:
        out = gpt_fast.generate(model, prompt, args.new_tokens, temperature=0.8, top_k=200)
        assert out.shape[0] == PROMPT_LEN + args.new_tokens

    return _median_rate(_timed(once, args.repeats), args.new_tokens)


def generate_child(args: argparse.Namespace) -> dict[str, Any]:
    """transformers' ``generate()``; under ``--recipe``, with the static cache and the compiled
    forward transformers' docs give for it (``cache_implementation="static"``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=WIDTH, num_hidden_layers=args.layers, num_attention_heads=HEADS,
                         num_key_value_heads=KV_HEADS, intermediate_size=FFN, vocab_size=VOCAB,
                         tie_word_embeddings=True, rope_theta=ROPE_THETA, max_position_embeddings=4096)
    torch.manual_seed(0)
    device = _device(args)
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval().to(device.torch_device)
    _quantize(model, args)
    static = {}
    if args.recipe:
        backend, _, mode = args.recipe.partition(":")
        static = {"cache_implementation": "static"}
        model.forward = torch.compile(model.forward, backend=backend, mode=mode or None, fullgraph=True)
    prompt = torch.randint(1, VOCAB, (1, PROMPT_LEN), generator=torch.Generator().manual_seed(0))
    prompt = prompt.to(device.torch_device)
    mask = torch.ones_like(prompt)

    def once() -> None:
        out = model.generate(input_ids=prompt, attention_mask=mask, max_new_tokens=args.new_tokens,
                             min_new_tokens=args.new_tokens, do_sample=False, use_cache=True,
                             pad_token_id=0, **static)
        assert out.shape[1] == PROMPT_LEN + args.new_tokens

    return _median_rate(_timed(once, args.repeats, device), args.new_tokens)


def in_process(args: argparse.Namespace, workload: Any, model: Any, recipe: str) -> dict[str, Any]:
    """``plain`` and ``accelbench`` alternated in one process on one model (one compilation, one
    kept cache) under ``recipe`` ("" eager): on a GPU, where a fresh process per round would spend
    the lease compiling. Each generation timed by the wall clock between the device's
    synchronisations; per pair the ratio accelbench / plain of tokens/s (> 1: accelbench reads
    faster)."""
    import torch

    from accelbench.measure.generation.recipe import prepare_generation
    from accelbench.measure.generation.rounds import clock_maker, greedy_round

    device = _device(args)
    runner = prepare_generation(model, recipe, device, workload, "llama-1b")
    decoder = _plain_decode(model, recipe)
    prompt = workload.make_prompt(1, PROMPT_LEN, 0).to(device.torch_device)
    new_clock = clock_maker(device, args.new_tokens - 1)
    plain, accel, own = [], [], []
    with torch.no_grad(), runner.settings():
        for repeat in range(1 + args.repeats):
            device.synchronize()
            start = time.perf_counter()
            plain_generate(model, decoder, prompt, args.new_tokens)
            device.synchronize()
            plain_seconds = time.perf_counter() - start
            start = time.perf_counter()
            _, timed = greedy_round(workload, runner.prefill, prompt, args.new_tokens, new_clock(),
                                    decode_model=runner.decode)
            device.synchronize()
            if repeat:  # the first pair warms up (compiles, captures)
                plain.append(args.new_tokens / plain_seconds)
                accel.append(args.new_tokens / (time.perf_counter() - start))
                own.append(args.new_tokens / (timed.ttft_s + timed.decode_s))
    return {"plain_tokens_per_s": plain, "accelbench_tokens_per_s": accel,
            "accelbench_own_clock_tokens_per_s": own, "execution": runner.finish().to_dict()}


CHILDREN = {"plain": plain_child, "accelbench": accelbench_child, "gpt_fast": gpt_fast_child,
            "generate": generate_child}


def run_child(name: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", name, "--precision", args.precision,
               "--layers", str(args.layers), "--new-tokens", str(args.new_tokens), "--repeats",
               str(args.repeats), "--threads", str(args.threads), "--device", args.device,
               "--recipe", args.recipe, "--size", args.size]
    if args.gpt_fast_dir:
        command += ["--gpt-fast-dir", str(args.gpt_fast_dir)]
    if args.compile:
        command.append("--compile")
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **PINNED_MALLOC})
    if done.returncode:
        raise SystemExit(f"{name} failed:\n{done.stderr.strip()[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise_in_process(data: dict[str, Any]) -> list[str]:
    plain, accel = data["plain_tokens_per_s"], data["accelbench_tokens_per_s"]
    ratios = [a / p for a, p in zip(accel, plain, strict=True)]
    centre, _, _ = log_ratio_interval(ratios, level=0.90)
    return [f"llama-1b-shaped ({data['layers']} layers) {data['precision']} on {data['device']}, recipe "
            f"{data['recipe'] or 'eager'}: prompt {PROMPT_LEN}, {data['new_tokens']} new tokens, batch 1, "
            f"{len(ratios)} pairs in one process",
            f"  plain      {statistics.median(plain):9.1f} tokens/s (median; new tokens / whole generation)",
            f"  accelbench {statistics.median(accel):9.1f} tokens/s (the same, wall clock around its round); "
            f"its own clock {statistics.median(data['accelbench_own_clock_tokens_per_s']):.1f}",
            f"  accelbench / plain geometric mean {centre:.3f} ({within_margin(ratios, 0.05)}); pairs: "
            + ", ".join(f"{r:.3f}" for r in ratios),
            f"  execution: {data['execution']}"]


def summarise(data: dict[str, Any]) -> list[str]:
    runs = data["runs"]
    loads = data["load"]
    lines = [f"llama-1b-shaped ({data['layers']} layers) {data['precision']}: prompt {PROMPT_LEN}, "
             f"{data['new_tokens']} new tokens, batch 1, {data['threads']} thread(s); "
             f"{len(runs['plain'])} rounds x {data['repeats']} generations; load average "
             f"{min(loads):.1f}-{max(loads):.1f} over {os.cpu_count()} CPUs"]
    for name, series in runs.items():
        rates = [r["tokens_per_s"] for r in series]
        cpu = [r["cpu_tokens_per_s"] for r in series]
        lines.append(f"  {name:10s} {statistics.median(rates):8.3f} tokens/s wall, "
                     f"{statistics.median(cpu):8.3f} by CPU time (medians of the processes; new "
                     "tokens / whole generation)")
    for key, clock in (("tokens_per_s", "wall"), ("cpu_tokens_per_s", "CPU time")):
        for other in [n for n in runs if n != "accelbench"]:
            ratios = [a[key] / b[key] for a, b in zip(runs["accelbench"], runs[other], strict=True)]
            centre, low, high = log_ratio_interval(ratios, level=0.90)
            judged = within_margin(ratios) if other == "plain" else f"90% CI {low:.3f}-{high:.3f}"
            lines.append(f"  [{clock:8s}] accelbench / {other:9s} geometric mean {centre:.3f} "
                         f"({judged}); rounds: " + ", ".join(f"{r:.3f}" for r in ratios))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=("bf16", "int8-wo", "int4-wo"), default="bf16")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, mps ... (accelbench's names)")
    parser.add_argument("--recipe", default="", metavar="BACKEND:MODE",
                        help="the execution recipe, as --compile takes it (inductor:reduce-overhead: "
                        "gpt-fast's static cache and compiled decode with CUDA graphs); plain and "
                        "accelbench both run it, generate() with transformers' static cache")
    parser.add_argument("--in-process", action="store_true",
                        help="plain and accelbench alternated in one process (a GPU: one compile)")
    parser.add_argument("--and-eager", action="store_true",
                        help="with --in-process and --recipe: eager pairs first, on the same model "
                        "(saved under 'eager')")
    parser.add_argument("--layers", type=int, default=16, help="of Llama-3.2-1B's 16")
    parser.add_argument("--size", choices=("published", "tiny"), default="published",
                        help="llama-1b's shape, or its tiny one (accelbench's model only: a check that "
                        "the script runs)")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2, help="timed generations per process")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--gpt-fast-dir", type=Path,
                        help="a copy of pytorch/pytorch's benchmarks/gpt_fast (without it, gpt-fast "
                        "is left out)")
    parser.add_argument("--compile", action="store_true", help="gpt-fast: torch.compile as CI does")
    parser.add_argument("--no-generate", action="store_true", help="leave transformers' generate() out")
    parser.add_argument("--save", type=Path, metavar="FILE.json")
    parser.add_argument("--child", choices=tuple(CHILDREN), help=argparse.SUPPRESS)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    if args.child:
        print(json.dumps(CHILDREN[args.child](args)))
        return
    if args.in_process:
        # --and-eager: the eager pairs first, on the same model (one build), then the recipe's;
        # each summarised and saved as it ends (a step cut short keeps what finished).
        workload, model = _accelbench_model(args)
        head = {"precision": args.precision, "layers": args.layers, "new_tokens": args.new_tokens,
                "device": args.device, "size": args.size}
        parts: dict[str, dict[str, Any]] = {}
        for recipe in ([""] if args.and_eager and args.recipe else []) + [args.recipe]:
            parts[recipe] = {**head, "recipe": recipe, **in_process(args, workload, model, recipe)}
            print("\n".join(summarise_in_process(parts[recipe])), flush=True)
            if args.save:
                eager = {"eager": parts[""]} if args.recipe and "" in parts else {}
                args.save.write_text(json.dumps({**parts.get(args.recipe, {}), **eager}))
        return
    contenders = ["plain", "accelbench"] + (["gpt_fast"] if args.gpt_fast_dir else []) \
        + ([] if args.no_generate else ["generate"])
    data: dict[str, Any] = {"precision": args.precision, "layers": args.layers, "new_tokens": args.new_tokens,
                            "repeats": args.repeats, "threads": args.threads, "load": [],
                            "runs": {name: [] for name in contenders}}
    interleaved_rounds(contenders, args.rounds, lambda name: run_child(name, args), data["runs"], data,
                       args.save, lambda name, run: f"{name} {run['tokens_per_s']:.2f} tokens/s "
                       f"({run['cpu_tokens_per_s']:.2f} by CPU time)")
    print("\n".join(summarise(data)))


if __name__ == "__main__":
    main()
