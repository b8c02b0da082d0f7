"""How a generation case executes, the field's execution recipe: the key/value cache's kind, what
runs the prefill and the decode step (eager or compiled, in which ``torch.compile`` mode), and
whether CUDA graphs were captured. Chosen by ``--compile BACKEND[:MODE]`` (``--protocol gpt-fast``
applies gpt-fast's) and recorded in the result's ``execution`` section.

- Not compiled: prefill and decode run the eager model.
- Compiled without a graph mode: the model's forward is compiled; prefill and decode both go
  through it (a prompt's graph and a token's graph).
- A graph mode (``reduce-overhead``, ``max-autotune``), gpt-fast's ``generate.py``: one cache is
  allocated at the first prefill and kept for every round (``setup_caches``; its tensors marked
  static addresses, so inductor captures the graph that writes them), the decode step is compiled
  ``fullgraph=True`` in that mode, and the prefill runs eager (gpt-fast compiles it only with
  ``--compile_prefill``). On a device without graph capture the mode compiles without graphs, and
  the record says so. A workload whose cache grows each token cannot be captured: unsupported.

A decode timed without graphs on a fast GPU measures the host's kernel launches, not the device:
``decode_bytes.judge_decode`` says which bound a row hit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from torch import nn

from accelbench.devices import Device
from accelbench.devices.compilation import INDUCTOR, CompileSpec
from accelbench.measure.compiled import compile_module, cudagraph_skips
from accelbench.measure.generation.execution import Execution


@dataclass
class GenerationRunner:
    """What measure_generation runs: ``prefill`` for the prompt, ``decode`` for each token; call
    ``confirm`` once it has generated (compiled code really ran) and read ``execution`` then."""

    prefill: nn.Module
    decode: nn.Module
    confirm: Callable[[], None]
    finish: Callable[[], Execution]
    #: Entered around everything that may compile (the warm-up and the rounds): the recipe's
    #: inductor settings, put back on leaving, so the next case starts from torch's own.
    settings: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext


def _confirming(compiled: nn.Module, backend: str, workload: str) -> Callable[[], None]:
    """A check to call once ``compiled`` should have run: torch.compile compiles a module's
    forward only, so a workload whose prefill and decode_step call the model's other methods
    (``model.prefill``) runs the original module's eager code; the check raises
    NotImplementedError (the case's status: unsupported) rather than let eager timings or tokens
    stand as compiled ones. The hook removes itself at the first call: nothing of it stays in the
    timed tokens."""
    called: list[bool] = []

    def first_call(module: nn.Module, args: Any) -> None:
        called.append(True)
        hook.remove()

    hook = compiled.register_forward_pre_hook(first_call)

    def confirm() -> None:
        hook.remove()
        if not called:
            raise NotImplementedError(
                f"--compile {backend} is not supported for generating with {workload!r}: its "
                "prefill and decode_step never call the model, so no compiled code would run "
                "(torch.compile compiles forward only); call model(...) in them")

    return confirm


def compile_for_generation(model: nn.Module, compile_backend: str,
                           workload: str) -> tuple[nn.Module, Callable[[], None]]:
    """(``model`` compiled as ``compile_backend`` says, or as it is for ""; the check to call
    once it has generated, :func:`_confirming`). Prefill and decode through one compiled forward:
    the recipe for modes without CUDA graphs (``check`` runs it too)."""
    if not CompileSpec.parse(compile_backend).compiled:
        return model, lambda: None
    compiled = compile_module(model, compile_backend)
    return compiled, _confirming(compiled, compile_backend, workload)


def _graphs_words(spec: CompileSpec, device: Device, skipped: int) -> str:
    if not spec.graphs:
        return "not asked"
    if not device.graph_capture:
        return f"none: {device.name} has no graph capture (the mode compiled without graphs)"
    if skipped:
        return (f"skipped: inductor declined {skipped} graph(s) (TORCH_LOGS=perf_hints says why); "
                "those steps launched each kernel from the host")
    return f"captured ({device.graph_capture})"


def prepare_generation(model: nn.Module, compile_backend: str, device: Device, workload: Any,
                       name: str) -> GenerationRunner:
    """The prefill and decode models of a case compiled as ``compile_backend`` says, on
    ``workload``'s cache (see the module's notes)."""
    spec = CompileSpec.parse(compile_backend)
    kind = str(getattr(workload, "kv_cache_kind", "dynamic"))
    skips_before = cudagraph_skips()
    if not spec.graphs:
        runnable, confirm = compile_for_generation(model, compile_backend, name)
        how = "compiled" if spec.compiled else "eager"
        execution = Execution(kind, spec.text, how, how, "not asked")
        return GenerationRunner(runnable, runnable, confirm, lambda: execution)
    workload.keep_cache(model)  # NotImplementedError for a growing cache: the case is unsupported
    kind = str(getattr(workload, "kv_cache_kind", kind))  # transformers' StaticCache, once kept
    decode = compile_module(model, compile_backend, fullgraph=True)
    confirm = _confirming(decode, compile_backend, name)
    tuned = spec.backend == INDUCTOR

    def finish() -> Execution:
        graphs = _graphs_words(spec, device, cudagraph_skips() - skips_before)
        return Execution(f"{kind}, kept", spec.text, "eager", "compiled, fullgraph", graphs,
                         INDUCTOR_SETTINGS_WORDS if tuned else "")

    settings = inductor_settings if tuned else contextlib.nullcontext
    return GenerationRunner(model, decode, confirm, finish, settings)


#: gpt-fast's generate.py sets it before compiling: inductor then turns a batch-1 product into a
#: fused reduction (torch/_inductor/decomposition.py ``mm``: "our matrix vector multiplies only
#: achieve peak bandwidth with coordinate descent tuning"), which also fuses int8's dequantisation.
INDUCTOR_SETTINGS = {"coordinate_descent_tuning": True}
INDUCTOR_SETTINGS_WORDS = "coordinate_descent_tuning (gpt-fast's)"


def inductor_settings() -> AbstractContextManager[Any]:
    """The recipe's inductor settings for the block, torch's own again after it."""
    import torch._inductor.config

    return torch._inductor.config.patch(INDUCTOR_SETTINGS)
