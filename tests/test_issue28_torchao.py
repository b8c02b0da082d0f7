"""Issue 28 item 3: torchao's ``quantize_`` where it is installed (``int8-wo-torchao``,
``int4-wo-torchao``), never required: without it a case is "unsupported" with the reason. torchao
is not installed here, so its wiring is held to a stand-in with torchao's API shape (``quantize_``
swapping each ``nn.Linear`` weight for a packed tensor subclass), whose bytes are counted by the
subclass's inner tensors, as torchao's are."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._pytree import tree_map

from accelbench.devices import DeviceSet
from accelbench.measure.generation.decode_bytes import stored_bytes, weight_reads
from accelbench.measure.generation.quantize import (
    int8_weights,
    quantize_weights,
    tensor_bytes,
    torchao_unsupported,
)
from accelbench.workloads.builtin.llama import Llama1B

CPU = DeviceSet.current().select("cpu")[0]


class PackedWeight(torch.Tensor):
    """int8 values and a scale per row behind a bf16 [n, k] face (torchao's kind of tensor)."""

    @staticmethod
    def __new__(cls, values: torch.Tensor, scales: torch.Tensor) -> PackedWeight:
        return torch.Tensor._make_wrapper_subclass(cls, values.shape, dtype=scales.dtype,  # type: ignore[attr-defined]
                                                   device=values.device)

    def __init__(self, values: torch.Tensor, scales: torch.Tensor) -> None:
        self.values, self.scales = values, scales

    def __tensor_flatten__(self) -> tuple[list[str], Any]:
        return ["values", "scales"], None

    def dequantized(self) -> torch.Tensor:
        return self.values.to(self.dtype) * self.scales[:, None]

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in (torch.ops.aten.detach.default, torch.ops.aten.alias.default):
            return args[0]

        def plain(value: Any) -> Any:
            return value.dequantized() if isinstance(value, PackedWeight) else value
        return func(*tree_map(plain, args), **tree_map(plain, kwargs or {}))

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.linear:
            weight = args[1]
            return F.linear(args[0], weight.dequantized().to(args[0].dtype), *args[2:])
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


def _fake_torchao() -> types.ModuleType:
    package, api = types.ModuleType("torchao"), types.ModuleType("torchao.quantization")

    class Int8WeightOnlyConfig:
        pass

    class Int4WeightOnlyConfig:
        def __init__(self, group_size: int = 128) -> None:
            self.group_size = group_size

    def quantize_(model: nn.Module, config: Any) -> None:
        for module in model.modules():
            if isinstance(module, nn.Linear):
                values, scales = int8_weights(module.weight.detach(), module.weight.dtype)
                module.weight = nn.Parameter(PackedWeight(values, scales), requires_grad=False)

    api.Int8WeightOnlyConfig, api.Int4WeightOnlyConfig = Int8WeightOnlyConfig, Int4WeightOnlyConfig
    api.quantize_ = quantize_
    package.quantization = api
    return package


@pytest.fixture
def fake_torchao(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    package = _fake_torchao()
    monkeypatch.setitem(sys.modules, "torchao", package)
    monkeypatch.setitem(sys.modules, "torchao.quantization", package.quantization)
    yield


def test_without_torchao_the_case_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torchao", None)  # an import of it fails, as where not installed
    reason = torchao_unsupported(CPU, "int4-wo-torchao")
    assert reason and "torchao is not installed" in reason
    with pytest.raises(NotImplementedError, match="torchao is not installed"):
        quantize_weights(nn.Linear(8, 8), "int8-wo-torchao", CPU)


def test_torchao_quantizes_every_linear_and_its_packed_bytes_are_counted(fake_torchao: None) -> None:
    assert torchao_unsupported(CPU, "int8-wo-torchao") is None
    workload = Llama1B("tiny")
    torch.manual_seed(0)
    model = workload.build_model().bfloat16().eval()
    report = quantize_weights(model, "int8-wo-torchao", CPU)
    assert report.library == "torchao" and report.quantized == 11 and report.kept == {}
    assert report.kernel == "torchao quantize_ (Int8WeightOnlyConfig)"
    packed = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    assert all(isinstance(w, PackedWeight) for w in packed)
    assert stored_bytes(packed[0]) == packed[0].numel() * 1 + packed[0].shape[0] * 2  # int8 + bf16 scales
    assert report.packed_bytes == sum(stored_bytes(w) for w in packed)
    others = {id(t): t for t in (*model.parameters(), *model.buffers()) if not isinstance(t, PackedWeight)}
    assert report.weight_bytes == tensor_bytes(model) == report.packed_bytes + sum(
        t.numel() * t.element_size() for t in others.values())
    prompt = workload.make_prompt(1, 1, 0)
    with torch.no_grad():
        logits, cache = workload.prefill(model, prompt, 2)
        reads = weight_reads(lambda: workload.decode_step(model, logits.argmax(-1), cache), model)
    assert reads.by_read["PackedWeight (packed) as stored"] == report.packed_bytes


def test_a_run_without_torchao_reports_unsupported(cli, tmp_path: Path) -> None:
    if importlib.util.find_spec("torchao") is not None:
        pytest.skip("torchao is installed here")
    out = tmp_path / "r.json"
    done = cli("run", "gpt2", "--mode", "generate", "--precision", "int8-wo-torchao", "--device", "cpu",
               "--size", "tiny", "--prompt-len", "4", "--new-tokens", "4", "--steps", "1",
               "--isolation", "none", "--output", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    assert case["status"] == "unsupported" and "torchao is not installed" in case["error"]
