"""Item 15 on CUDA: inductor graphs run in every decode step of the built-in decoder (the script
the device ran, reformatted for ruff; the logic is unchanged)."""

import time
from typing import Any

import torch
from torch._inductor.compile_fx import compile_fx

from accelbench.engine.measure_case import compile_for_generation
from accelbench.workloads import get_workload_class
from accelbench.workloads.builtin.decoder import greedy_generate

calls: list[int] = []


def counting_inductor(gm: torch.fx.GraphModule, inputs: Any) -> Any:
    fn = compile_fx(gm, inputs)
    index = len(calls)
    calls.append(0)

    def run(*args: Any) -> Any:
        calls[index] += 1
        return fn(*args)
    return run


def ms_per_token(model: torch.nn.Module, prompt: torch.Tensor) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    greedy_generate(model, prompt, 64)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / 64 * 1e3


workload = get_workload_class("gpt2")("published")
torch.manual_seed(0)
model = workload.build_model().to("cuda", torch.bfloat16).eval()
prompt = workload.make_prompt(1, 128, 0).cuda()
with torch.no_grad():
    eager = greedy_generate(model, prompt, 32)
    compiled, confirm = compile_for_generation(model, counting_inductor, "gpt2")
    start = time.time()
    got = greedy_generate(compiled, prompt, 32)
    torch.cuda.synchronize()
    print(f"first compiled generation (compile included) {time.time() - start:.1f} s")
    confirm()
    print("graph calls after 1 generation:", calls)
    eager_ms = sorted(ms_per_token(model, prompt) for _ in range(5))[2]
    compiled_ms = sorted(ms_per_token(compiled, prompt) for _ in range(5))[2]
    print("graph calls after timing:", calls)
    print(f"ms/token eager {eager_ms:.3f} compiled {compiled_ms:.3f}")
    print("tokens agree (first 32):", int((eager == got).sum()), "of", eager.numel())
