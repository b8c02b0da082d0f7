"""``torch.compile`` as a case asks for it (``devices/compilation.py``: a back end and a mode), in
one place: the timed steps, generation's recipe and ``check`` all compile through here, so a mode
given on the command line reaches every compiled model the same way."""

from __future__ import annotations

from typing import Any

import torch

from accelbench.devices.compilation import CompileSpec


def compile_module(model: Any, compile_backend: str, *, fullgraph: bool = False) -> Any:
    """``model`` (a module or function) compiled as ``compile_backend`` says ("inductor",
    "inductor:reduce-overhead"); as it is when that is "" (not compiled). ``fullgraph``: a graph
    break is an error rather than a silent fall back to Python between graphs (gpt-fast compiles
    its decode step so: a break there would leave launches on the host)."""
    spec = CompileSpec.parse(compile_backend)
    if not spec.compiled:
        return model
    options: dict[str, Any] = {"backend": spec.backend}
    if spec.mode:
        options["mode"] = spec.mode
    if fullgraph:
        options["fullgraph"] = True
    return torch.compile(model, **options)


def cudagraph_skips() -> int:
    """How many times inductor has declined to capture a CUDA graph in this process (its own
    counter, ``torch._inductor.cudagraph_utils.log_cudagraph_skip_and_bump_counter``: a mutated
    input that is not static, a CPU tensor in the graph, dynamic shapes ...); 0 before dynamo is
    loaded."""
    import sys

    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0
    return int(utils.counters["inductor"].get("cudagraph_skips", 0))
