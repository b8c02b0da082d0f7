"""Item 15 on CUDA: inductor graphs run in every decode step of the built-in decoder."""
import time, torch
from torch._inductor.compile_fx import compile_fx
from accelbench.workloads import get_workload_class
from accelbench.engine.measure_case import compile_for_generation
from accelbench.workloads.decoder import greedy_generate
calls = []
def counting_inductor(gm, inputs):
    fn = compile_fx(gm, inputs); i = len(calls); calls.append(0)
    def run(*a):
        calls[i] += 1
        return fn(*a)
    return run
w = get_workload_class("gpt2")("published")
torch.manual_seed(0)
m = w.build_model().to("cuda", torch.bfloat16).eval()
p = w.make_prompt(1, 128, 0).cuda()
with torch.no_grad():
    eager = greedy_generate(m, p, 32)
    c, confirm = compile_for_generation(m, counting_inductor, "gpt2")
    t = time.time(); got = greedy_generate(c, p, 32); torch.cuda.synchronize()
    print("first compiled generation (compile included) %.1f s" % (time.time() - t))
    confirm()
    print("graph calls after 1 generation:", calls)
    def tpot(model):
        torch.cuda.synchronize(); t = time.perf_counter(); greedy_generate(model, p, 64); torch.cuda.synchronize()
        return (time.perf_counter() - t) / 64 * 1e3
    e = sorted(tpot(m) for _ in range(5))[2]; k = sorted(tpot(c) for _ in range(5))[2]
    print("graph calls after timing:", calls)
    print("ms/token eager %.3f compiled %.3f" % (e, k))
    print("tokens agree (first 32):", int((eager == got).sum()), "of", eager.numel())
