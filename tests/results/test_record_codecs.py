"""Derived codecs (issue 26 "the cause, removed"; item 12's lesson): every result record's
to_dict/from_dict is built from its dataclass fields (results/validate.py), and this test
round-trips each record with a NON-default value in every field, so a field a codec drops (as
``RunOptions.to_dict`` dropped ``prompt_lens``) fails here the moment it is declared."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

import pytest

from accelbench.results import (
    CaseResult,
    DeviceProbe,
    Energy,
    Flops,
    Parity,
    ProbeCell,
    Profile,
    RunRecord,
    ScaleFigures,
    Sensors,
)
from accelbench.results.validate import _hints, build, dump

#: Fields whose value must be one of a few words, or a number in a range: a valid non-default.
CHOICES: dict[str, Any] = {"status": "oom", "verdict": "drift", "mode": "eval", "kind": "sweep"}
OWN_CHOICES: dict[tuple[str, str], Any] = {("ProbeCell", "status"): "slower"}


def sample(hint: Any, name: str, default: Any = dataclasses.MISSING, owner: str = "") -> Any:
    """A value of type ``hint`` that differs from ``default``."""
    if (owner, name) in OWN_CHOICES:
        return OWN_CHOICES[owner, name]
    if name in CHOICES:
        return CHOICES[name]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return sample(options[0], name)
    if dataclasses.is_dataclass(hint):
        return full_record(hint)  # type: ignore[arg-type]
    if origin is list:
        (item,) = typing.get_args(hint)
        return [sample(item, name)]
    if origin is tuple:
        items = typing.get_args(hint)
        if len(items) == 2 and items[1] is Ellipsis:  # tuple[X, ...]: a variable-length one
            return (sample(items[0], name),)
        return tuple(sample(item, name) for item in items)
    if origin is dict:
        _, item = typing.get_args(hint)
        return {"k": sample(item, name)}
    if hint is Any:
        return {"any": [1, "two"]}
    if hint is bool:
        return not default if isinstance(default, bool) else True
    if hint is int:
        return 7 if default != 7 else 8
    if hint is float:
        return 2.5 if default != 2.5 else 3.5
    if hint is str:
        return f"{name}-x"
    raise AssertionError(f"no sample for {hint!r} ({name})")


def full_record(cls: type) -> Any:
    hints = _hints(cls)
    values = {}
    for spec in dataclasses.fields(cls):
        default = spec.default
        if spec.default_factory is not dataclasses.MISSING:
            default = spec.default_factory()
        values[spec.name] = sample(hints[spec.name], spec.name, default, cls.__name__)
    return cls(**values)


def _non_default_fields(record: Any) -> list[str]:
    same = []
    for spec in dataclasses.fields(record):
        default = spec.default if spec.default_factory is dataclasses.MISSING else spec.default_factory()
        if default is not dataclasses.MISSING and getattr(record, spec.name) == default:
            same.append(spec.name)
    return same


@pytest.mark.parametrize("cls", [Energy, Flops, Parity, Sensors, ScaleFigures, Profile, ProbeCell,
                                 DeviceProbe])
def test_each_typed_record_round_trips_every_field(cls: type) -> None:
    record = full_record(cls)
    assert not _non_default_fields(record), "the sample must set every field"
    again = build(cls, json.loads(json.dumps(dump(record))))
    assert again == record


def test_a_case_and_its_run_round_trip_every_field() -> None:
    case = full_record(CaseResult)
    case.batch_size, case.steps_per_sample = 4, 2
    case.step_times, case.epoch_times = [0.25, 0.5], [1.5]
    assert not _non_default_fields(case)
    run = full_record(RunRecord)
    run.cases, run.probes = [case], [full_record(DeviceProbe)]
    text = json.dumps(run.to_dict())
    again = RunRecord.from_dict(json.loads(text))
    assert again.unknown_keys == []  # what a record writes beside its fields is declared (JSON_EXTRA)
    for spec in dataclasses.fields(CaseResult):
        assert getattr(again.cases[0], spec.name) == getattr(case, spec.name), spec.name
    for spec in dataclasses.fields(RunRecord):
        if spec.name not in ("cases",) and spec.metadata.get("stored", True):
            assert getattr(again, spec.name) == getattr(run, spec.name), spec.name
