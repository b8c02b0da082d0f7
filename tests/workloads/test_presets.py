"""Workload sizes are data: every workload declares a complete preset per named size, nothing
branches on the size's name, and a workload written against the older attributes still runs."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
import torch
from torch import nn

from accelbench.data.options import DataOptions
from accelbench.data.synthetic import synthetic_epoch
from accelbench.devices import DeviceSet
from accelbench.engine.case import Case
from accelbench.engine.measure_case import run_case
from accelbench.errors import UsageError
from accelbench.options import RunOptions, StopRule
from accelbench.workloads import get_workload_class, registry, workload_names
from accelbench.workloads.base import Batch, Workload, WorkloadContractError, check_contract
from accelbench.workloads.presets import SIZES, Preset

SRC = Path(__file__).resolve().parents[2] / "src" / "accelbench"


def test_every_registered_workload_declares_both_presets_with_complete_fields() -> None:
    # accelbench's own (other test modules register user workloads of the older contract).
    names = [n for n in workload_names() if get_workload_class(n).__module__.startswith("accelbench.")]
    assert {"mnist", "vae", "resnet50", "vgg16", "bert-base", "simclr-resnet18"} <= set(names)
    for name in [*names, "torchvision:resnet18"]:  # and a model resolved by name
        cls = get_workload_class(name)
        assert set(cls.presets) == set(SIZES), name  # declared on the class, not derived
        kinds = {type(preset) for preset in cls.presets.values()}
        assert len(kinds) == 1 and issubclass(kinds.pop(), Preset), name  # same fields at each size
        for size, preset in cls.presets.items():
            for field in dataclasses.fields(preset):
                assert getattr(preset, field.name) is not None, (name, size, field.name)
            for mode in cls.modes:
                assert preset.batch_size[mode] > 0 and preset.dataset_size[mode] > 0, (name, size)
            workload = cls(size)
            assert workload.preset is preset
            assert workload.batch_size(cls.modes[0]) == preset.batch_size[cls.modes[0]]


#: ``size == "tiny"``, ``self.size != ...``, ``TABLE[self.size]``: a size chosen by its name.
SIZE_BRANCH = re.compile(r"\bsize\s*(==|!=)|\[\s*self\.size\s*\]")


def test_no_workload_or_model_module_branches_on_the_size_name() -> None:
    files = sorted((SRC / "workloads").glob("*.py")) + sorted((SRC / "models").glob("*.py"))
    assert len(files) > 10
    offending = [f"{path.name}:{number}: {line.strip()}" for path in files
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if SIZE_BRANCH.search(line)]
    assert offending == []
    assert SIZE_BRANCH.search('tiny = self.size == "tiny"') and SIZE_BRANCH.search("SEQ[self.size]")


def test_an_unknown_size_is_a_usage_error_naming_the_allowed_ones() -> None:
    with pytest.raises(UsageError, match="unknown workload size 'huge'; allowed: published, tiny"):
        get_workload_class("mnist")("huge")
    with pytest.raises(UsageError, match=r"batch_size\['train'\] must be a positive integer; got 0"):
        Preset(batch_size={"train": 0}, dataset_size={"train": 8})


def random_batch(generator: torch.Generator, batch_size: int) -> Batch:
    return torch.randn(batch_size, 4, generator=generator), torch.randint(0, 2, (batch_size,),
                                                                          generator=generator)


class OlderContract(Workload):
    """A user workload as the README used to show it: sizes as class attributes, no presets."""

    name = "older-contract"
    default_batch_size = {"train": 4, "eval": 8}
    dataset_size = {"train": 16, "eval": 16}

    def build_model(self) -> nn.Module:
        return nn.Linear(4, 2)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.1)

    def make_batches(self, mode: str, batch_size: int, options: DataOptions) -> Iterable[Batch]:
        return synthetic_epoch(random_batch, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return nn.functional.cross_entropy(model(batch[0]), batch[1])

    def eval_step(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return nn.functional.cross_entropy(model(batch[0]), batch[1])


def test_a_workload_with_only_the_older_size_attributes_still_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    check_contract(OlderContract)
    tiny = OlderContract("tiny")  # no tiny_ attributes: the published sizes
    assert (tiny.batch_size("train"), tiny.samples_per_epoch("eval")) == (4, 16)
    with_tiny = type("WithTiny", (OlderContract,), {"tiny_batch_size": {"train": 2, "eval": 2}})
    assert with_tiny("tiny").batch_size("train") == 2 and with_tiny().batch_size("train") == 4
    cpu = DeviceSet.current().select("cpu")[0]
    options = RunOptions(workloads=("older-contract",), size="tiny", stop=StopRule("steps", 2),
                         warmup_steps=0, device="cpu", isolation="none")
    monkeypatch.setitem(registry._CLASSES, "older-contract", OlderContract)  # registered for this test
    result = run_case(Case(workload="older-contract", mode="train", device=cpu, batch_size=4), options)
    assert result.ok and result.dataset_size == 16 and result.steps_per_epoch == 4


def test_presets_are_checked_when_a_workload_is_registered() -> None:
    full = Preset(batch_size={"train": 4, "eval": 4}, dataset_size={"train": 8, "eval": 8})
    train_only = Preset(batch_size={"train": 4}, dataset_size={"train": 8, "eval": 8})

    def declaring(presets: dict) -> type[Workload]:
        return type("Declared", (OlderContract,), {"name": "declared", "presets": presets})

    with pytest.raises(WorkloadContractError, match=r"does not define presets\['tiny'\]"):
        check_contract(declaring({"published": full}))
    with pytest.raises(WorkloadContractError, match=r"presets\['tiny'\].batch_size\['eval'\]"):
        check_contract(declaring({"published": full, "tiny": train_only}))
    with pytest.raises(WorkloadContractError, match=r"unknown sizes \['huge'\]"):
        check_contract(declaring({"published": full, "tiny": full, "huge": full}))
    check_contract(declaring({"published": full, "tiny": full}))
