"""The features ``accelbench probe`` tries, one small function each, and their registry.

The contract (Feature, Trial, Result, tolerances, seeded inputs) is in ``accelbench.probes``.
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.probes import (
    TOLERANCE,
    Feature,
    OpRecorder,
    Trial,
    every_warning,
    fallback_ops,
    first_statement,
    message_text,
    randn,
    result,
    seeded,
    user_features,
)

#: TF32 keeps 10 mantissa bits, like float16.
TF32_TOLERANCE = 1e-2
CHECK_SIZE = 128
#: Operations that are timed are large enough that an accelerator that supports them well beats
#: the CPU; tiny ones would only measure kernel-launch overhead.
TIMING_SIZE = 512


# --- dtypes ------------------------------------------------------------------------------------
def _dtype_ops(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A matmul and elementwise arithmetic: the core of every training step."""
    return a @ b + a * b


def _dtype_feature(dtype: torch.dtype) -> Feature:
    name = str(dtype).removeprefix("torch.")
    wide = torch.complex128 if dtype.is_complex else torch.float64

    def inputs(size: int, seeds: tuple[int, int]) -> list[torch.Tensor]:
        return [randn(size, size, seed=seed, dtype=wide) for seed in seeds]

    def run(device: str) -> Trial:
        out = _dtype_ops(*(t.to(device, dtype) for t in inputs(CHECK_SIZE, (1, 2))))
        big_a, big_b = (t.to(device, dtype) for t in inputs(TIMING_SIZE, (3, 4)))
        return Trial([result(out)], op=lambda: _dtype_ops(big_a, big_b))

    def reference() -> torch.Tensor:
        return _dtype_ops(*inputs(CHECK_SIZE, (1, 2)))

    return Feature(name, f"matmul and elementwise ops in {name}", run, reference)


def _complex_conv_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return randn(4, 8, 1024, seed=5, dtype=torch.complex128), randn(16, 8, 9, seed=6,
                                                                     dtype=torch.complex128)


def _complex_conv(device: str) -> Trial:
    x, w = (t.to(device, torch.complex64) for t in _complex_conv_inputs())
    return Trial([result(F.conv1d(x, w))], op=lambda: F.conv1d(x, w))


def _fft_input() -> torch.Tensor:
    return randn(16, 4096, seed=7, dtype=torch.complex128)


def _fft(device: str) -> Trial:
    x = _fft_input().to(device, torch.complex64)
    return Trial([result(torch.fft.fft(x))], op=lambda: torch.fft.fft(x))


# --- autocast ----------------------------------------------------------------------------------
def _mlp() -> nn.Module:
    # Tanh, not ReLU: a pre-activation that rounds across zero in float16 would switch a ReLU
    # unit and change its gradient wholesale, an error of the check rather than of the device.
    with seeded(10):
        return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 8))


def _train_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, dtype: torch.dtype | None,
                kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """One SGD step, under autocast (with gradient scaling for float16) when ``dtype`` is given.

    Returns the loss and the update of the first layer's weight: the update is where the
    low-precision gradients and an unscaling mistake would show.
    """
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(kind, enabled=dtype == torch.float16)
    weight = next(model.parameters())  # the first layer's
    before = weight.detach().clone()
    with torch.autocast(device_type=kind, dtype=dtype or torch.float32, enabled=dtype is not None):
        out = model(x)
    if dtype is not None and out.dtype != dtype:
        raise RuntimeError(f"autocast did not run in {dtype}: the output is {out.dtype}")
    loss = F.mse_loss(out.to(y.dtype), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach(), weight.detach() - before


def _autocast_feature(dtype: torch.dtype) -> Feature:
    name = str(dtype).removeprefix("torch.")
    tolerance = TOLERANCE[dtype]

    def run(device: str) -> Trial:
        kind = torch.device(device).type
        x, y = randn(16, 32, seed=11).float().to(device), randn(16, 8, seed=12).float().to(device)
        loss, update = _train_step(_mlp().to(device), x, y, dtype, kind)
        model, plain = _mlp().to(device), _mlp().to(device)
        return Trial([result(loss, "loss", tolerance), result(update, "update", tolerance)],
                     op=lambda: _train_step(model, x, y, dtype, kind),
                     baseline=lambda: _train_step(plain, x, y, None, kind), baseline_name="float32")

    def reference() -> dict[str, torch.Tensor]:
        loss, update = _train_step(_mlp().double(), randn(16, 32, seed=11), randn(16, 8, seed=12),
                                   None, "cpu")
        return {"loss": loss, "update": update}

    scaled = " with GradScaler" if dtype == torch.float16 else ""
    return Feature(f"autocast_{'fp16' if dtype == torch.float16 else 'bf16'}",
                   f"a training step under torch.autocast({name}){scaled}", run, reference,
                   group="autocast")


# --- torch.compile -----------------------------------------------------------------------------
def _tiny(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).sum(dim=-1) * 0.5


def _compile_feature(backend: str) -> Feature:
    def run(device: str) -> Trial:
        import torch._dynamo

        # Forget earlier compilations so that this backend really compiles, and is timed doing so.
        torch._dynamo.reset()
        x, w = randn(64, 32, seed=20).float().to(device), randn(32, 16, seed=21).float().to(device)
        compiled = torch.compile(_tiny, backend=backend)
        start = time.perf_counter()
        out = compiled(x, w)
        took = time.perf_counter() - start
        return Trial([result(out)], op=lambda: compiled(x, w), baseline=lambda: _tiny(x, w),
                     baseline_name="eager", notes=[f"first call (compiling) {took:.1f} s"])

    def reference() -> torch.Tensor:
        return _tiny(randn(64, 32, seed=20), randn(32, 16, seed=21))

    return Feature(f"compile:{backend}", f"torch.compile(backend={backend!r}) of a tiny function",
                   run, reference, timed=False, group="compile")


def compile_backends() -> list[str]:
    """The registered backends, plus eager and aot_eager: they separate a failure of graph capture
    (eager), of AOTAutograd (aot_eager) and of code generation (inductor)."""
    import torch._dynamo

    return sorted({"eager", "aot_eager", *torch._dynamo.list_backends()})


# --- layout, attention, transformer ------------------------------------------------------------
def _conv2d() -> nn.Module:
    with seeded(30):
        return nn.Conv2d(8, 16, 3, padding=1)


def _channels_last(device: str) -> Trial:
    conv = _conv2d().to(device)
    x = randn(4, 8, 32, 32, seed=31).float().to(device)
    conv_cl = copy.deepcopy(conv).to(memory_format=torch.channels_last)
    x_cl = x.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        out_cl, out = conv_cl(x_cl), conv(x)
        layout = ("output stays channels_last" if out_cl.is_contiguous(memory_format=torch.channels_last)
                  else "output is not channels_last")
        difference = (out_cl - out).abs().max().item()
    return Trial([result(out_cl, "channels_last"), result(out, "contiguous")],
                 op=torch.no_grad()(lambda: conv_cl(x_cl)), baseline=torch.no_grad()(lambda: conv(x)),
                 baseline_name="contiguous",
                 notes=[layout, f"max |channels_last - contiguous| {difference:.1e}"])


def _channels_last_reference() -> torch.Tensor:
    with torch.no_grad():
        return _conv2d().double()(randn(4, 8, 32, 32, seed=31))


def _qkv() -> list[torch.Tensor]:
    return [randn(4, 8, 128, 64, seed=s) for s in (40, 41, 42)]


def _sdpa_feature(kernel: str) -> Feature:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, kernel)
    short = kernel.removesuffix("_ATTENTION").lower()

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v)

    def run(device: str) -> Trial:
        trial, refused = Trial(), list[tuple[str, str]]()
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            q, k, v = (t.to(device, dtype) for t in _qkv())
            try:
                with every_warning() as caught:
                    trial.results.append(result(attend(q, k, v)))
            except RuntimeError as error:
                # torch explains a refused kernel in warnings, the last error only says none ran
                said = [line for w in caught for line in message_text(w.message).splitlines()]
                reason = first_statement(said) or first_statement(str(error).splitlines())
                refused.append((str(dtype).removeprefix("torch."), reason))
                continue
            if trial.op is None:
                trial.op = lambda q=q, k=k, v=v: attend(q, k, v)
        if not trial.results:
            raise RuntimeError("it ran in no dtype: " + "; ".join(_by_reason(refused)))
        trial.notes.append("ran in " + ", ".join(r.label for r in trial.results))
        trial.notes.extend(f"not in {reason}" for reason in _by_reason(refused))
        return trial

    def reference() -> torch.Tensor:
        q, k, v = _qkv()
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return weights @ v

    return Feature(f"sdpa:{short}", f"scaled_dot_product_attention with only the {kernel} kernel",
                   run, reference, group="sdpa")


def _by_reason(refused: list[tuple[str, str]]) -> list[str]:
    """``float16, bfloat16: reason``: one entry per distinct reason, as kernels refuse whole groups."""
    reasons: dict[str, list[str]] = {}
    for dtype, reason in refused:
        reasons.setdefault(reason, []).append(dtype)
    return [f"{', '.join(dtypes)}: {reason}" for reason, dtypes in reasons.items()]


def sdpa_kernels() -> list[str]:
    from torch.nn.attention import SDPBackend

    names = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")
    return [name for name in names if hasattr(SDPBackend, name)]


def _encoder_layer() -> nn.TransformerEncoderLayer:
    with seeded(50):
        return nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)


def _transformer_fastpath(device: str) -> Trial:
    layer = _encoder_layer().to(device).eval()
    slow = copy.deepcopy(layer).train()  # training mode takes the ordinary path; dropout is 0
    x = randn(4, 16, 64, seed=51).float().to(device)
    with torch.no_grad(), OpRecorder() as seen:
        out = layer(x)
    if "_transformer_encoder_layer_fwd" not in seen.ops:
        return Trial(failure="the fast path did not run: aten::_transformer_encoder_layer_fwd "
                     "was not dispatched")
    return Trial([result(out)], op=torch.no_grad()(lambda: layer(x)),
                 baseline=torch.no_grad()(lambda: slow(x)), baseline_name="the ordinary path",
                 notes=["detected: aten::_transformer_encoder_layer_fwd was dispatched"])


def _transformer_reference() -> torch.Tensor:
    with torch.no_grad():
        return _encoder_layer().double().train()(randn(4, 16, 64, seed=51))


# --- functional transforms and matmul precision ------------------------------------------------
def _functional_call(device: str) -> Trial:
    with seeded(60):  # its own weights are replaced; seeded only to leave the global RNG alone
        model = nn.Linear(16, 8).to(device)
    params = {"weight": randn(8, 16, seed=60).float().to(device),
              "bias": randn(8, seed=61).float().to(device)}
    x = randn(32, 16, seed=62).float().to(device)
    return Trial([result(torch.func.functional_call(model, params, (x,)))])


def _functional_call_reference() -> torch.Tensor:
    return randn(32, 16, seed=62) @ randn(8, 16, seed=60).T + randn(8, seed=61)


def _forward_ad(device: str) -> Trial:
    x, v = randn(256, seed=70).float().to(device), randn(256, seed=71).float().to(device)
    tangent = torch.func.jvp(lambda t: torch.sin(t) * t, (x,), (v,))[1]
    return Trial([result(tangent)])


def _forward_ad_reference() -> torch.Tensor:
    x, v = randn(256, seed=70), randn(256, seed=71)
    return (torch.cos(x) * x + torch.sin(x)) * v  # d/dx [x sin x], written out by hand


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def _matmul_at(precision: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with matmul_precision(precision):
        return a @ b


def _matmul_precision_high(device: str) -> Trial:
    a, b = (randn(CHECK_SIZE, CHECK_SIZE, seed=s).float().to(device) for s in (1, 2))
    high, highest = _matmul_at("high", a, b), _matmul_at("highest", a, b)
    changed = (high - highest).abs().max().item()
    big_a, big_b = (randn(TIMING_SIZE, TIMING_SIZE, seed=s).float().to(device) for s in (3, 4))
    return Trial([result(high, "float32 at 'high'", TF32_TOLERANCE)],
                 op=lambda: _matmul_at("high", big_a, big_b),
                 baseline=lambda: _matmul_at("highest", big_a, big_b), baseline_name="'highest'",
                 notes=[f"results change by {changed:.1e} vs 'highest'" if changed
                        else "results identical to 'highest'"])


def _matmul_reference() -> torch.Tensor:
    return randn(CHECK_SIZE, CHECK_SIZE, seed=1) @ randn(CHECK_SIZE, CHECK_SIZE, seed=2)


# --- MPS: ops without an MPS kernel ------------------------------------------------------------
#: Ops that have lacked MPS kernels in some torch releases; the probe finds which still do.
_MPS_SAMPLE_OPS: dict[str, Callable[[str], Any]] = {
    "linalg.eig": lambda d: torch.linalg.eig(torch.eye(3, device=d)),
    "nonzero": lambda d: torch.nonzero(torch.ones(4, device=d)),
    "kthvalue": lambda d: torch.kthvalue(torch.arange(5.0, device=d), 2),
    "histc": lambda d: torch.histc(torch.arange(5.0, device=d), bins=4),
    "grid_sample 3d": lambda d: F.grid_sample(torch.ones(1, 1, 2, 2, 2, device=d),
                                               torch.zeros(1, 1, 1, 1, 3, device=d), align_corners=False),
    "ctc_loss": lambda d: F.ctc_loss(torch.zeros(4, 1, 3, device=d).log_softmax(2),
                                     torch.ones(1, 2, dtype=torch.long, device=d),
                                     # Lengths as lists: the IntList overload is the op sampled
                                     # (aten::_ctc_loss); torch's stub declares only tensors.
                                     [4], [2]),  # type: ignore[arg-type]
}


def _mps_fallback(device: str) -> Trial:
    """torch names each op it sends to the CPU in a warning (PYTORCH_ENABLE_MPS_FALLBACK=1, read
    when torch is imported) or, without the fallback, in the NotImplementedError it raises."""
    messages, refusals = [], []
    for op in _MPS_SAMPLE_OPS.values():
        with every_warning() as caught:
            try:
                op(device)
            except NotImplementedError as error:
                refusals.append(str(error))
                messages.append(str(error))
        messages.extend(str(w.message) for w in caught)
    lacking, refused = fallback_ops(messages), fallback_ops(refusals)
    trial = Trial(notes=[f"of {len(_MPS_SAMPLE_OPS)} sampled ops, "
                         + (f"no MPS kernel: {', '.join(lacking)}" if lacking else "all ran on MPS")])
    if refused:
        trial.failure = (f"no MPS kernel and no CPU fallback for {', '.join(refused)} "
                         "(set PYTORCH_ENABLE_MPS_FALLBACK=1 before starting)")
    return trial


# --- the registry ------------------------------------------------------------------------------
def all_features() -> list[Feature]:
    """Every feature, in display order (built on demand: listing compile backends imports dynamo);
    a user's own (``probe --feature-file``) last."""
    features = [
        *(_dtype_feature(dtype) for dtype in (torch.float64, torch.float16, torch.bfloat16,
                                              torch.complex64, torch.complex32)),
        Feature("complex_conv1d", "conv1d on complex64 input", _complex_conv,
                lambda: F.conv1d(*_complex_conv_inputs())),
        Feature("fft", "torch.fft.fft on complex64", _fft, lambda: torch.fft.fft(_fft_input())),
        _autocast_feature(torch.float16),
        _autocast_feature(torch.bfloat16),
        *(_compile_feature(backend) for backend in compile_backends()),
        Feature("channels_last", "conv2d in channels_last memory format", _channels_last,
                _channels_last_reference),
        *(_sdpa_feature(kernel) for kernel in sdpa_kernels()),
        Feature("transformer_fastpath", "nn.TransformerEncoderLayer fast path (eval, no_grad)",
                _transformer_fastpath, _transformer_reference),
        Feature("functional_call", "torch.func.functional_call with substituted parameters",
                _functional_call, _functional_call_reference, timed=False),
        Feature("forward_ad", "forward-mode AD (torch.func.jvp)", _forward_ad, _forward_ad_reference,
                timed=False),
        Feature("matmul_precision_high", "float32 matmul after set_float32_matmul_precision('high')",
                _matmul_precision_high, _matmul_reference),
        Feature("mps_fallback", "which of a sample of ops lack an MPS kernel (CPU fallback)",
                _mps_fallback, kinds=("mps",), timed=False),
    ]
    return [*features, *user_features()]


def select_features(features: list[Feature], patterns: list[str] | None,
                    skip_groups: tuple[str, ...] = ()) -> list[Feature]:
    """Features matching any of the shell-style ``patterns`` (all when none), minus skipped groups.

    Raises ``LookupError`` naming the first pattern that matches no feature.
    """
    chosen = [f for f in features if f.group not in skip_groups]
    if not patterns:
        return chosen
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(f.name, pattern) for f in features):
            raise LookupError(pattern)
    return [f for f in chosen if any(fnmatch.fnmatchcase(f.name, p) for p in patterns)]
