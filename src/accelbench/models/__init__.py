"""Models by name (``timm:resnet18``, ``torchvision:vit_b_16``, ``hf:bert``) and model objects
(``accelbench.bench(model, batch)``), turned into ordinary workloads.

A prefixed name resolves to a Workload class, built from the model's architecture and config only
(random weights: nothing is ever downloaded but, for ``hf:ORG/NAME``, the ~1 kB config), and is
registered under its full name. Worker processes resolve the same name again, so named models run
isolated like every other workload. This package is imported only when a prefixed name appears.
"""

from __future__ import annotations

import fnmatch
import importlib

from accelbench.errors import UsageError
from accelbench.workloads.base import Workload, register

#: Prefix -> module with ``resolve(rest) -> type[Workload]`` and ``list_names(pattern) -> list[str]``.
PREFIXES = {
    "timm": "accelbench.models.timm_",
    "torchvision": "accelbench.models.torchvision_",
    "hf": "accelbench.models.hf",
    "bench": "accelbench.models.objects",
}


def is_model_name(name: str) -> bool:
    prefix, colon, _ = name.partition(":")
    return bool(colon) and prefix in PREFIXES


def _split(name: str) -> tuple[str, str]:
    prefix, _, rest = name.partition(":")
    if prefix not in PREFIXES:
        raise UsageError(f"unknown model prefix {prefix!r} in {name!r}; allowed: "
                         f"{', '.join(p + ':' for p in PREFIXES)}")
    if not rest:
        raise UsageError(f"{name!r} names no model; write e.g. {prefix}:NAME")
    return prefix, rest


def resolve(name: str) -> type[Workload]:
    """The workload class for a prefixed model name, registered under that name."""
    prefix, rest = _split(name)
    cls = importlib.import_module(PREFIXES[prefix]).resolve(rest)
    cls.name = name
    return register(cls)


def match_models(pattern: str) -> list[str]:
    """Full names matching ``pattern``: an exact name is resolved (so a bad one fails here, before
    anything runs); a wildcard is expanded by the model library's own listing."""
    prefix, rest = _split(pattern)
    if not any(ch in rest for ch in "*?["):
        resolve(pattern)
        return [pattern]
    names = importlib.import_module(PREFIXES[prefix]).list_names(rest)
    hits = [f"{prefix}:{n}" for n in names if fnmatch.fnmatchcase(n, rest)]
    if not hits:
        raise UsageError(f"no {prefix} model matches {rest!r}")
    return hits
