"""The catalogue: the one resolver that turns any workload name into its class.

A built-in name loads its module (which registers the class), a named model (``timm:``,
``torchvision:``, ``hf:``, ``bench:``) is built by its adapter under ``workloads/named/`` and
registered under its full name, and a user's workload file registers its classes when loaded
(``--workload-file``). Worker processes resolve the same name again, so every kind of name runs
isolated alike.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

from accelbench.errors import UsageError, did_you_mean
from accelbench.workloads import registry
from accelbench.workloads.base import Workload, register
from accelbench.workloads.userfile import run_user_file


def load_builtin() -> None:
    """Import every built-in workload's module (each registers its classes)."""
    for module in dict.fromkeys(registry.BUILTIN.values()):
        importlib.import_module(module)


def workload_names() -> list[str]:
    """Every registered name: the built-ins, and what workload files and models have added."""
    load_builtin()
    return sorted(registry.registered())


def resolve_model(name: str) -> type[Workload]:
    """The workload class for a prefixed model name, registered under that name."""
    prefix, rest = registry.split_model_name(name)
    cls = importlib.import_module(registry.PREFIXES[prefix]).resolve(rest)
    cls.name = name
    return register(cls)


def match_models(pattern: str) -> list[str]:
    """Full names matching ``pattern``: an exact name is resolved (so a bad one fails here, before
    anything runs); a wildcard is expanded by the model library's own listing."""
    prefix, rest = registry.split_model_name(pattern)
    if not registry.is_wildcard(rest):
        resolve_model(pattern)
        return [pattern]
    names = importlib.import_module(registry.PREFIXES[prefix]).list_names(rest)
    hits = [f"{prefix}:{n}" for n in registry.matching(rest, names)]
    if not hits:
        raise UsageError(f"no {prefix} model matches {rest!r}")
    return hits


def get_workload_class(name: str) -> type[Workload]:
    """The class for any name: built-in, registered by a workload file, or a model name."""
    classes = registry.registered()
    if name in classes:
        return classes[name]
    if registry.is_model_name(name):
        return resolve_model(name)  # timm:, torchvision:, hf:, bench: resolve on first use
    if name in registry.BUILTIN:
        importlib.import_module(registry.BUILTIN[name])
        return registry.registered()[name]
    raise UsageError(f"unknown workload {name!r}{did_you_mean(name, workload_names())}; known: "
                     f"{', '.join(workload_names())}"
                     f"{registry.MODEL_NAME_HINT}")


def match_workloads(patterns: Sequence[str]) -> list[str]:
    """Names matching each pattern (exact names or shell wildcards like ``resnet*``), in order."""
    return registry.match(patterns, match_models)


def load_workload_file(path: Path) -> list[str]:
    """Execute a user's workload file and return the names of the workloads it registered."""
    path = Path(path)
    before = set(registry.registered())
    module_name = run_user_file(path, "workload file")
    # A file loaded again registers nothing new: its names are then those its classes came from.
    added = sorted(set(registry.registered()) - before) or sorted(
        name for name, cls in registry.registered().items() if cls.__module__ == module_name)
    if not added:
        raise UsageError(f"workload file {path} registers no workload; decorate a subclass of "
                         "accelbench.Workload with @accelbench.register")
    return added
