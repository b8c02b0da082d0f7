"""The built-in workloads' facts, counted once and kept with the versions that counted them.

Counting FLOPs builds every model (``accelbench list`` took 12-19 s on the 2-core VM); the facts
change only when the code or a library that builds the models changes. So the facts are stored
under the data folder (``facts-cache.json``) with a stamp of everything they depend on: the
accelbench version, the versions of torch, torchvision and transformers (read from the installed
packages' metadata, without importing them) and a digest of the contents of every file of the
workloads package. Any difference and they are counted again. accelbench also ships the facts it
counted (``workloads/builtin/facts.json``, written by ``scripts/workload_facts.py``, with the same
stamp): where the stamp matches this installation exactly, a first ``list`` reads them instead of
counting. Torch-free: a warm ``list`` starts no torch.
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.files import data_home, write_atomic
from accelbench.workloads.facts_record import ModelFacts, facts_from_dict

CACHE_FILE = "facts-cache.json"
#: The libraries that build or describe the built-in models (their version changes a count or a
#: fact): torchvision's ResNet-50 and VGG-16, transformers' BERT, torch's FLOP counter.
LIBRARIES = ("torch", "torchvision", "transformers")
#: The facts accelbench ships, counted by scripts/workload_facts.py (used where the stamp matches).
SHIPPED = Path(__file__).resolve().parent / "builtin" / "facts.json"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _code_stamp() -> str:
    """A digest of the contents of the workloads package's sources (by content, not time, so the
    shipped facts can match an installation; about 1 ms)."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(f"{path.relative_to(package).as_posix()}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def stamp() -> dict[str, str]:
    """What the facts depend on."""
    return {"accelbench": __version__, "workloads_code": _code_stamp(),
            **{name: _version(name) for name in LIBRARIES}}


def cache_path() -> Path:
    return data_home() / CACHE_FILE


def _read(path: Path, names: list[str], size: str, current: dict[str, str]) -> list[ModelFacts] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("stamp") != current:
            return None
        stored = data["facts"][size]
        return [facts_from_dict(stored[name]) for name in names]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load(names: list[str], size: str = "published") -> list[ModelFacts] | None:
    """The cached facts of ``names`` (in order), or None unless every one is there with today's
    stamp (a broken or foreign file is treated as absent). Where the data folder has none, the
    shipped facts, if their stamp is this installation's (then kept in the data folder too)."""
    current = stamp()
    facts = _read(cache_path(), names, size, current)
    if facts is None:
        facts = _read(SHIPPED, names, size, current)
        if facts is not None:
            store(facts, size)
    return facts


def store(facts: list[ModelFacts], size: str = "published") -> None:
    """Add ``facts`` to the cache (a fresh one when the stamp changed); a cache that cannot be
    written is not worth failing the command over."""
    current = stamp()
    try:
        data: dict[str, Any] = json.loads(cache_path().read_text(encoding="utf-8"))
        if data.get("stamp") != current or not isinstance(data.get("facts"), dict):
            raise ValueError("stale")
    except (OSError, ValueError):
        data = {"stamp": current, "facts": {}}
    data["facts"].setdefault(size, {}).update({item.name: item.to_dict() for item in facts})
    try:
        cache_path().parent.mkdir(parents=True, exist_ok=True)
        write_atomic(cache_path(), json.dumps(data, indent=1))
    except OSError:
        pass
