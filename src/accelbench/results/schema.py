"""The result format's version, its history, and the steps that upgrade an older dict.

Format history (bump ``SCHEMA_VERSION`` and add ``_UPGRADES[old]`` for every change a reader of the
old format would misread; never edit a released step):

  1  accelbench 0.1. A case's extra figures lived in a free ``extra`` object: ``parity``,
     ``energy``, ``flops``, ``sensors``, ``scale``, ``profile`` (flat: the profile's figures, with
     ``ceilings`` or ``error`` beside them), ``backend_flags``, ``memory_is_lower_bound``,
     ``oom_batch_sizes``, ``nonfinite_step``, ``traceback``, ``stderr_tail``, ``isolation``,
     ``skipped`` and ``torchrun_output_tail``. A probe run stored each device as a fake case
     (``workload: "features"``, ``mode: "probe"``) with its cells in ``extra.probe``.
  2  Typed records (results/figures.py, results/probe.py). Every key of ``extra`` became a field
     of the case with the same name, except that ``torchrun_output_tail`` moved into
     ``scale.output_tail`` and ``profile`` became ``{"figures": ..., "ceilings": ..., "error": ...}``;
     ``extra`` is gone (keys accelbench never wrote are dropped on upgrade). A probe run has no
     cases: ``probes`` holds one ``{"device", "device_name", "threads", "cells"}`` per device.
     Every record has a ``probes`` list (empty outside probe runs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelbench.errors import UsageError

SCHEMA_VERSION = 2


def schema_version_of(data: dict[str, Any]) -> int:
    """The file's version, or a UsageError when it has none, or one this accelbench cannot read."""
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UsageError("result file has no integer 'schema_version'; is it an accelbench result?")
    if version > SCHEMA_VERSION:
        raise UsageError(f"result file has schema version {version}, newer than this accelbench "
                         f"reads (<= {SCHEMA_VERSION}); upgrade accelbench")
    if version < 1:
        raise UsageError(f"result file has invalid schema version {version}")
    return version


def upgrade(data: dict[str, Any], target: int = SCHEMA_VERSION) -> dict[str, Any]:
    """``data`` (a whole run record's dict) upgraded step by step to ``target``; the input is left
    as it was. Upgrades reshape, they do not validate: the loader checks the result."""
    version = schema_version_of(data)
    for step in range(version, target):
        data = _UPGRADES[step](data)
        data["schema_version"] = step + 1
    return data


# --- 1 -> 2 ----------------------------------------------------------------------------------------
#: extra keys that became case fields of the same name.
_V1_FIELDS = ("parity", "energy", "flops", "sensors", "scale", "backend_flags",
              "memory_is_lower_bound", "oom_batch_sizes", "nonfinite_step", "traceback",
              "stderr_tail", "isolation", "skipped")


def _profile_from_v1(flat: Any) -> Any:
    if not isinstance(flat, dict):
        return flat  # the loader reports it
    nested: dict[str, Any] = {}
    if "steps" in flat:
        nested["figures"] = {k: v for k, v in flat.items() if k not in ("ceilings", "error")}
    if "ceilings" in flat:
        nested["ceilings"] = flat["ceilings"]
    if "error" in flat:
        nested["error"] = flat["error"]
    return nested


def case_from_v1(case: dict[str, Any]) -> dict[str, Any]:
    """A version-1 case dict as version 2: the ``extra`` keys as fields."""
    case = dict(case)
    extra = case.pop("extra", {})
    if not isinstance(extra, dict):
        return case
    for name in _V1_FIELDS:
        if name in extra:
            case[name] = extra[name]
    if "profile" in extra:
        case["profile"] = _profile_from_v1(extra["profile"])
    tail = extra.get("torchrun_output_tail")
    if tail is not None and isinstance(case.get("scale"), dict):
        case["scale"] = {**case["scale"], "output_tail": tail}
    return case


def is_v1_probe_case(kind: Any, case: Any) -> bool:
    return (kind == "probe" and isinstance(case, dict) and case.get("workload") == "features"
            and isinstance(case.get("extra"), dict) and "probe" in case["extra"])


def probe_from_v1(case: dict[str, Any]) -> dict[str, Any]:
    """A version-1 probe run's fake case as the version-2 per-device probe."""
    return {"device": case.get("device", ""), "device_name": case.get("device_name", ""),
            "threads": case.get("threads", 0), "cells": case["extra"]["probe"]}


def _upgrade_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    cases = data.get("cases", [])
    if not isinstance(cases, list):
        return data  # the loader reports it
    kind = data.get("kind", "run")
    data["probes"] = [probe_from_v1(c) for c in cases if is_v1_probe_case(kind, c)]
    data["cases"] = [case_from_v1(c) if isinstance(c, dict) else c
                     for c in cases if not is_v1_probe_case(kind, c)]
    return data


#: _UPGRADES[v] turns a version-v record dict into a version-(v+1) one.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _upgrade_1_to_2}
assert sorted(_UPGRADES) == list(range(1, SCHEMA_VERSION)), "every older version needs its step"
