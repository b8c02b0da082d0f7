"""Issue 26, item 12a: the options' to_dict/from_dict are derived from their dataclass fields.

``RunOptions.to_dict`` was a hand list that dropped ``prompt_lens`` and ``new_tokens``, and every
round-trip test used the defaults, so nothing caught it. Here each options dataclass of
``accelbench.options`` goes through JSON and back from samples that set EVERY field to a value
other than its default: a field added later and left out of the samples fails
``test_the_samples_set_every_field_off_its_default``, and an options dataclass added later
without samples fails ``test_every_options_dataclass_has_samples``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
from pathlib import Path
from typing import Any

import pytest

import accelbench.options
from accelbench.codec import from_dict
from accelbench.devices import DeviceSet
from accelbench.engine.case import Case
from accelbench.engine.spec import CaseSpec
from accelbench.options import RunOptions, StopRule
from accelbench.options.check import CheckOptions
from accelbench.options.probe import ProbeOptions
from accelbench.options.scale import Rendezvous, ScaleOptions

FOLDER = Path(__file__).resolve().parents[1]

#: Every field off its default across a class's samples (some settings exclude each other in
#: one: --repeat 2 needs --isolation process, the default; --sustained refuses --mode generate).
RUN = RunOptions(
    workloads=("nanogpt-char", "mnist"), device="cuda:1", modes=("train", "generate"),
    stop=StopRule("steps", 7), warmup_steps=1, batch_size=8, threads=2, data="real",
    data_dir=FOLDER, size="tiny", workers=2, seed=5, precisions=("bf16", "fp32"),
    compile_backends=("inductor", ""), channels_last=True, workload_files=("/w/a.py",),
    case_timeout=60.0, auto_batch=True, cooldown=1.5, repeat=3, profile=True,
    cudnn_benchmark=False, suite="quick", prompt_lens=(8, 16), new_tokens=(4, 2), stream=True,
    stop_given=True)
SUSTAINED = StopRule("sustained", 120.0, 0.0, 5.0)
SAMPLES: dict[type, list[Any]] = {
    StopRule: [SUSTAINED],
    RunOptions: [RUN, RunOptions(isolation="none", stop=SUSTAINED), RunOptions(
        warm_worker=True, modes=("generate",), protocol="llama-bench"),
        RunOptions(isolation="torchrun", nproc=2)],
    CheckOptions: [CheckOptions(run=RUN, reference="cpu", steps=7)],
    ProbeOptions: [ProbeOptions(device="cuda", feature_patterns=("matmul*",), skip_compile=True,
                                feature_files=("/f.py",), isolation="none", case_timeout=30.0,
                                debug=True)],
    Rendezvous: [Rendezvous(2, 1, "host:29500", "static", "job-7")],
    ScaleOptions: [ScaleOptions(
        run=RunOptions(workloads=("mnist",), device="cuda", stop=StopRule("steps", 5),
                       warmup_steps=1, batch_size=4, size="tiny", threads=2, case_timeout=30.0,
                       seed=3, workload_files=("/w/w.py",), cudnn_benchmark=False),
        nproc=(1, 4), fsdp=True, backend="gloo", rendezvous=Rendezvous(2, 1, "host:29500"),
        echo=True)],
}


def _default(spec: dataclasses.Field[Any]) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return dataclasses.MISSING  # a required field: any value is the sample's own


def _stored(spec: dataclasses.Field[Any]) -> bool:
    return spec.metadata.get("stored", True)


def test_every_options_dataclass_has_samples() -> None:
    found = set()
    for info in pkgutil.iter_modules(accelbench.options.__path__):
        # How each flag is declared (Option), and what a record keeps of its options (flat, with
        # their own round trips in test_options_recorded.py), not options themselves.
        if info.name in ("declared", "recorded"):
            continue
        module = importlib.import_module(f"accelbench.options.{info.name}")
        found |= {value for value in vars(module).values() if isinstance(value, type)
                  and dataclasses.is_dataclass(value) and value.__module__.startswith("accelbench.options")}
    found |= {value for value in vars(accelbench.options).values() if isinstance(value, type)
              and dataclasses.is_dataclass(value)}
    assert found == set(SAMPLES)


@pytest.mark.parametrize("kind", list(SAMPLES), ids=lambda kind: kind.__name__)
def test_the_samples_set_every_field_off_its_default(kind: type) -> None:
    for spec in dataclasses.fields(kind):
        default = _default(spec)
        if default is dataclasses.MISSING:
            continue
        assert any(getattr(sample, spec.name) != default for sample in SAMPLES[kind]), (
            f"no sample of {kind.__name__} sets {spec.name} off its default {default!r}: add one, "
            "so the codec's round trip covers it")


@pytest.mark.parametrize("kind", list(SAMPLES), ids=lambda kind: kind.__name__)
def test_options_round_trip_through_json(kind: type) -> None:
    for sample in SAMPLES[kind]:
        data = json.loads(json.dumps(sample.to_dict()))
        assert set(data) == {spec.name for spec in dataclasses.fields(kind) if _stored(spec)}
        back = kind.from_dict(data)
        unstored = {spec.name: _default(spec) for spec in dataclasses.fields(kind)
                    if not _stored(spec)}
        assert back == dataclasses.replace(sample, **unstored)


def test_run_options_keep_the_generation_lengths() -> None:
    """The regression itself: to_dict dropped prompt_lens and new_tokens, so a worker process
    (which gets its options through the worker spec's JSON) ran the defaults."""
    data = RUN.to_dict()
    assert (data["prompt_lens"], data["new_tokens"]) == ([8, 16], [4, 2])
    cpu = DeviceSet.current().select("cpu")[0]
    spec = CaseSpec("accelbench.engine.runner:run_from_spec", RUN,
                    Case(workload="nanogpt-char", mode="generate", device=cpu, batch_size=1, prompt_len=8,
                         new_tokens=4))
    back = CaseSpec.from_json(spec.to_json()).run_options()
    assert (back.prompt_lens, back.new_tokens, back.stream) == ((8, 16), (4, 2), True)


def test_a_missing_field_takes_its_default_and_an_unknown_key_is_refused() -> None:
    """A record written before a field existed reads with the default; a key that is no field
    would be dropped without a word, so it is refused."""
    data = RUN.to_dict()
    del data["new_tokens"]
    assert RunOptions.from_dict(data).new_tokens == ()
    with pytest.raises(ValueError, match="RunOptions has no field 'prompt_len'"):
        from_dict(RunOptions, {**data, "prompt_len": [8]})
