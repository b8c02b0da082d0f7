"""The one comparability key: when two measurements did the same work.

Two cases are compared (run against run, machine against machine, accelerator against the same
run's CPU, one point of a history timeline against the next) only when every field of the key is
equal apart from the device. The run table's "vs CPU" cell, ``compare``'s machine rows and pairs,
``history`` timelines and the HTML report all ask this module, so they cannot disagree.

The key's fields are declared once, as ``CaseKey`` (results/case_key.py). The key is read from
a case (a planned Case or a CaseResult) or from a stored case dict (the history fills its columns from
old rows' JSON with the same function). A field a result does not carry takes its default, so a
result written before the field existed is keyed as what it measured.

Settings that change the speed but not the work (the thread count, ``cudnn.benchmark``) are not
in the key: two cases that differ only in them are compared, and :func:`setting_differences`
names the difference for ``compare`` to show beside the verdict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from accelbench.results.case_key import CaseKey, key_defaults, omitted_at_default

#: Field -> value a result without the field measured, in the key's order: ``fields(CaseKey)``
#: (results/case_key.py, where the fields are declared once and described).
KEY_DEFAULTS: dict[str, Any] = key_defaults()
#: Key fields added later: left out of the stored key string at their default, so that a run
#: stored before they existed keeps its key (the history matches runs on it).
_OMITTED_AT_DEFAULT = omitted_at_default()
KEY_FIELDS = tuple(KEY_DEFAULTS)

#: A case (a Case or a CaseResult, both CaseKeys) or a stored case dict.
CaseLike = CaseKey | Mapping[str, Any]


def _value(case: CaseLike, name: str) -> Any:
    if isinstance(case, Mapping):
        value = case.get(name, KEY_DEFAULTS[name])
    else:
        value = getattr(case, name, KEY_DEFAULTS[name])
    return KEY_DEFAULTS[name] if value is None else value


def comparability_key(case: CaseLike) -> tuple[Any, ...]:
    """Everything that must be equal for two cases to have done the same work (not the device)."""
    return tuple(_value(case, name) for name in KEY_FIELDS)


def key_json(case: CaseLike) -> str:
    """The key as a stable string, for the history's ``config_key`` column."""
    fields = dict(zip(KEY_FIELDS, comparability_key(case), strict=True))
    for name in _OMITTED_AT_DEFAULT:
        if fields[name] == KEY_DEFAULTS[name]:
            del fields[name]
    return json.dumps(fields, sort_keys=True)


def incomparable_reasons(a: CaseLike, b: CaseLike) -> list[str]:
    """Why A and B did different work, one phrase per differing field; empty when comparable."""
    reasons = []
    for name in KEY_FIELDS:
        mine, theirs = _value(a, name), _value(b, name)
        if mine != theirs:
            # An empty field (no protocol) is said, not printed as nothing: "protocol none vs ...".
            reasons.append(f"{name.replace('_', ' ')} {mine if mine != '' else 'none'} vs "
                           f"{theirs if theirs != '' else 'none'}")
    return reasons


def _threads(case: CaseLike) -> int | None:
    value = case.get("threads") if isinstance(case, Mapping) else getattr(case, "threads", None)
    return value if isinstance(value, int) and value > 0 else None  # 0: not recorded


def _cudnn_benchmark(case: CaseLike) -> bool | None:
    flags = case.get("backend_flags") if isinstance(case, Mapping) else getattr(case, "backend_flags", None)
    value = flags.get("cudnn_benchmark") if isinstance(flags, Mapping) else None
    return value if isinstance(value, bool) else None  # older results did not record it


def setting_differences(a: CaseLike, b: CaseLike) -> list[str]:
    """How A's and B's speed-only settings differ ("cudnn.benchmark on vs off", "threads 4 vs 8");
    a setting one side did not record is not a difference."""
    differences = []
    threads = _threads(a), _threads(b)
    if None not in threads and threads[0] != threads[1]:
        differences.append(f"threads {threads[0]} vs {threads[1]}")
    benchmark = _cudnn_benchmark(a), _cudnn_benchmark(b)
    if None not in benchmark and benchmark[0] != benchmark[1]:
        words = ["on" if on else "off" for on in benchmark]
        differences.append(f"cudnn.benchmark {words[0]} vs {words[1]}")
    return differences


def config_label(case: CaseLike) -> str:
    """The parts of the key that name a configuration, for a table cell: "bf16 compile:eager b64"."""
    parts = [str(_value(case, "precision"))]
    if _value(case, "compile_backend"):
        parts.append(f"compile:{_value(case, 'compile_backend')}")
    if _value(case, "channels_last"):
        parts.append("channels-last")
    if _value(case, "data") != "synthetic":
        parts.append(f"data:{_value(case, 'data')}")
    if _value(case, "size") != "published":
        parts.append(str(_value(case, "size")))
    if _value(case, "new_tokens"):
        parts.append(f"prompt {_value(case, 'prompt_len')} +{_value(case, 'new_tokens')}")
    if _value(case, "streamed"):
        parts.append("streamed")
    if _value(case, "protocol"):
        parts.append(f"protocol:{_value(case, 'protocol')}")
    parts.append(f"batch {_value(case, 'batch_size')}")
    return " ".join(parts)
