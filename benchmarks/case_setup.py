"""Where a generate case's time goes before its first decode round: llama-1b (or another
decoder) at full size, built, cast and quantized by the engine's own functions, each piece timed
by the wall clock; no decode round runs (on a CPU those are minutes at full size).

    .venv/bin/python benchmarks/case_setup.py                  # llama-1b, published size
    .venv/bin/python benchmarks/case_setup.py --byte-count     # and the one-token byte count

The pieces (each as measure_case._measure_generation runs it, in order):

- imports: torch, then accelbench's engine (a worker process pays both before its case);
- build: ``torch.manual_seed(seed); workload.build_model()``, split into the modules' own
  default initialisation (``nn.Linear``'s and ``nn.Embedding``'s ``reset_parameters``), the
  decoder's normal initialisation (``Decoder._init`` and the residual projections' re-draw) and
  the rest (allocation, the rotary tables at the model's full context);
- cast: ``prepare_model`` to bf16;
- quantize: ``quantize_weights`` to int8-wo and int4-wo, each on its own copy, on this device
  (a GPU does the same arithmetic on the device);
- byte count (``--byte-count``): ``rounds._decode_reads``, a one-token prefill and one decode
  step of the eager model, which every case runs before its warm-up.

The random draws of the build are serial on the CPU (one generator), so the thread count hardly
matters for them; the cast and the quantizer use every thread.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

_T0 = time.perf_counter()
import torch  # noqa: E402 - timed

TORCH_IMPORT_S = time.perf_counter() - _T0
_T1 = time.perf_counter()
from accelbench.devices import DeviceSet  # noqa: E402
from accelbench.devices.numerics import get_precision, prepare_model  # noqa: E402
from accelbench.measure.generation.quantize import quantize_weights  # noqa: E402
from accelbench.measure.generation.rounds import _decode_reads  # noqa: E402
from accelbench.workloads.builtin import decoder as decoder_module  # noqa: E402
from accelbench.workloads.catalogue import get_workload_class  # noqa: E402

ENGINE_IMPORT_S = time.perf_counter() - _T1


@contextlib.contextmanager
def timed(into: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        into[name] = into.get(name, 0.0) + time.perf_counter() - start


@contextlib.contextmanager
def accumulating(owner: Any, attribute: str, into: dict[str, float], name: str,
                 static: bool = False) -> Iterator[None]:
    """``owner.attribute`` (a function or method) timed at every call, into ``into[name]``."""
    original = getattr(owner, attribute)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with timed(into, name):
            return original(*args, **kwargs)

    setattr(owner, attribute, staticmethod(wrapper) if static else wrapper)
    try:
        yield
    finally:
        setattr(owner, attribute, staticmethod(original) if static else original)


def build(workload: Any, seed: int, into: dict[str, float]) -> torch.nn.Module:
    """``workload.build_model()`` as a case calls it, its parts timed."""
    nn = torch.nn
    with contextlib.ExitStack() as stack:
        stack.enter_context(accumulating(nn.Linear, "reset_parameters", into,
                                         "build: nn.Linear default init"))
        stack.enter_context(accumulating(nn.Embedding, "reset_parameters", into,
                                         "build: nn.Embedding default init"))
        stack.enter_context(accumulating(decoder_module.Decoder, "_init", into,
                                         "build: Decoder._init (normal)", static=True))
        stack.enter_context(accumulating(decoder_module, "rope_frequencies", into,
                                         "build: rope_frequencies"))
        torch.manual_seed(seed)
        with timed(into, "build (all)"):
            model = workload.build_model()
    return model


def rope_tables_s(model: Any) -> float:
    """The rotary cos/sin tables at the model's full context, as Decoder.__init__ makes them."""
    config = model.config
    if config.layout != "llama":
        return 0.0
    start = time.perf_counter()
    angles = torch.outer(torch.arange(config.context, dtype=torch.float64),
                         decoder_module.rope_frequencies(config))
    angles.cos().float(), angles.sin().float()
    return time.perf_counter() - start


def measure(args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, float] = {"import torch": TORCH_IMPORT_S, "import accelbench engine": ENGINE_IMPORT_S}
    device = DeviceSet.current().select(args.device)[0]
    workload = get_workload_class(args.workload)(args.size)
    model = build(workload, args.seed, figures)
    figures["build: rest (allocation, rotary tables, projections' re-draw)"] = figures["build (all)"] - sum(
        v for k, v in figures.items() if k.startswith("build: "))
    figures["(rotary tables at full context, apart)"] = rope_tables_s(model)
    parameters = sum(p.numel() for p in model.parameters())
    with timed(figures, "cast to bf16 (prepare_model)"):
        model = prepare_model(model, get_precision("bf16"), False)
    with timed(figures, "to the device"):
        model = model.to(device.torch_device).eval()
    runs: list[tuple[str, Callable[[torch.nn.Module], object]]] = [
        (precision, lambda m, p=precision: quantize_weights(m, p, device, fused=args.fused))
        for precision in args.quantize]
    for precision, quantize in runs:
        with timed(figures, f"copy for {precision} (this script's)"):
            copied = copy.deepcopy(model)
        with timed(figures, f"quantize {precision} (quantize_weights)"):
            quantize(copied)
        del copied
    if args.byte_count:
        with torch.no_grad(), timed(figures, "byte count (one-token prefill + decode, eager)"):
            _decode_reads(workload, model, device, casts_cached=True)
    return {"workload": args.workload, "size": args.size, "device": device.name,
            "parameters": parameters, "threads": torch.get_num_threads(),
            "seconds": {k: round(v, 3) for k, v in figures.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="llama-1b")
    parser.add_argument("--size", default="published")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quantize", default="int8-wo,int4-wo",
                        type=lambda s: [p for p in s.split(",") if p])
    parser.add_argument("--fused", action="store_true", help="int8 in inductor's fused form")
    parser.add_argument("--byte-count", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = measure(args)
    if args.json:
        print(json.dumps(data))
        return
    print(f"{data['workload']} {data['size']} on {data['device']}: {data['parameters']:,} parameters, "
          f"{data['threads']} threads")
    for name, seconds in data["seconds"].items():
        print(f"  {seconds:8.2f} s  {name}")


if __name__ == "__main__":
    main()
