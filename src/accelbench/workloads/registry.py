"""The registry: a leaf that knows every workload name and where its class lives, without
importing torch or any workload (option parsing and ``list`` read it cheaply).

Built-in workloads are data here (name -> defining module); a workload class joins the registry
with ``@register`` where it is defined (workloads/base.py), and named models (``timm:``,
``torchvision:``, ``hf:``, ``bench:``) when the catalogue resolves them. Turning a name into a
class is the catalogue's job (workloads/catalogue.py), the one resolver.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from accelbench.errors import UsageError, did_you_mean

#: Built-in workload name -> the module that defines (and registers) it.
BUILTIN: dict[str, str] = {
    "bert-base": "accelbench.workloads.builtin.bert",
    "transformer-small": "accelbench.workloads.builtin.bert",
    "gpt2": "accelbench.workloads.builtin.gpt2",
    "llama-1b": "accelbench.workloads.builtin.llama",
    "mnist": "accelbench.workloads.builtin.mnist",
    "nanogpt-char": "accelbench.workloads.builtin.nanogpt_char",
    "resnet50": "accelbench.workloads.builtin.resnet50",
    "simclr-resnet18": "accelbench.workloads.builtin.simclr",
    "vae": "accelbench.workloads.builtin.vae",
    "vgg16": "accelbench.workloads.builtin.vgg16",
}

#: Model-name prefix -> adapter module with ``resolve(rest) -> type[Workload]`` and
#: ``list_names(pattern) -> list[str]``.
PREFIXES: dict[str, str] = {
    "timm": "accelbench.workloads.named.timm_",
    "torchvision": "accelbench.workloads.named.torchvision_",
    "hf": "accelbench.workloads.named.hf",
    "bench": "accelbench.workloads.named.objects",
}

MODEL_NAME_HINT = "; or a model name: timm:NAME, torchvision:NAME, hf:TYPE, hf:ORG/NAME"

#: Every workload class registered so far, by name (built-ins once loaded, user files, models).
_CLASSES: dict[str, Any] = {}


def add(cls: Any) -> Any:
    """Keep ``cls`` under ``cls.name`` (the contract is checked by ``register`` before this)."""
    _CLASSES[cls.name] = cls
    return cls


def registered() -> dict[str, Any]:
    """The classes registered so far, by name (a copy)."""
    return dict(_CLASSES)


def builtin_names() -> list[str]:
    return sorted(BUILTIN)


def known_names() -> list[str]:
    """Every name known without importing a workload: the built-ins (loaded yet or not) and
    every class registered so far (workload files, resolved models)."""
    return sorted({*BUILTIN, *_CLASSES})


def is_wildcard(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def matching(pattern: str, names: Iterable[str]) -> list[str]:
    """The names that ``pattern`` (an exact name or a shell wildcard: ``*``, ``?``, ``[...]``)
    matches, case-sensitively, in their order: the one wildcard rule for built-in, registered and
    library model names alike."""
    return [name for name in names if fnmatch.fnmatchcase(name, pattern)]


def match_known(pattern: str) -> list[str]:
    """The known names matching ``pattern`` (an exact name or a shell wildcard like ``resnet*``);
    none is a UsageError that lists them. Model names (``timm:...``) are the catalogue's."""
    names = known_names()
    hits = matching(pattern, names)
    if not hits:
        raise UsageError(f"unknown workload {pattern!r}{did_you_mean(pattern, names)}; known: "
                         f"{', '.join(names)}{MODEL_NAME_HINT}")
    return hits


def match(patterns: Sequence[str], models: Callable[[str], list[str]]) -> list[str]:
    """The workload names that ``patterns`` choose, in order, each once: the one matcher behind
    ``run``'s names, ``list``, the API and the catalogue. A name registered as it stands is
    taken as it is (``bench()``'s model objects have names that no model library resolves); a
    model name (``timm:...``) goes to ``models`` (the catalogue's ``match_models``, which imports
    its library); anything else is matched among the known names without importing torch."""
    known = set(known_names())
    chosen: list[str] = []
    for pattern in patterns:
        if pattern in known:
            hits = [pattern]
        elif is_model_name(pattern):
            hits = models(pattern)
        else:
            hits = match_known(pattern)
        chosen.extend(hit for hit in hits if hit not in chosen)
    return chosen


def is_model_name(name: str) -> bool:
    """``timm:resnet18``, ``hf:gpt2`` ...: a name the named-model adapters resolve."""
    prefix, colon, _ = name.partition(":")
    return bool(colon) and prefix in PREFIXES


def split_model_name(name: str) -> tuple[str, str]:
    """(prefix, rest) of a model name; a UsageError names an unknown prefix or a missing name."""
    prefix, _, rest = name.partition(":")
    if prefix not in PREFIXES:
        raise UsageError(f"unknown model prefix {prefix!r} in {name!r}; allowed: "
                         f"{', '.join(p + ':' for p in PREFIXES)}")
    if not rest:
        raise UsageError(f"{name!r} names no model; write e.g. {prefix}:NAME")
    return prefix, rest
