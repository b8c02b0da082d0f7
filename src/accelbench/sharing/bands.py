"""Aggregate tables: the bands of a collection (``compare/bands.py``) as one small JSON file that
``compare --against FILE`` judges from, offline, sending nothing anywhere.

Format (``BANDS_VERSION``; a newer table is refused, as every file accelbench reads)::

    {"accelbench_bands": 2, "accelbench_version": ..., "built_at": ..., "sources": [...],
     "min_machines": 10, "published": "",          # a citation where built from published rows
     "bands": [{"key": {every KEY_FIELDS field}, "device_class": "cuda", "machines": 12,
                "results": 40, "first_date": "2026-01-02", "last_date": "2026-11-20",
                "percentiles": [p1, ..., p99], "published": "",
                "decode_class": "overhead:intel(r) xeon(r) processor", "recipe": "eager",
                "decode": "overhead-bound (host launches, ...): median 12x the bandwidth floor"}, ...]}

A key field the table lacks (one added to the key after it was written) reads as its default.
Versions: 1, the first; 2 split a generation key's bands by decode bound class (``decode_class``,
with ``recipe`` and ``decode``: ``compare/bands.py``); a version-1 table's bands read as not
judged (one band per key and device class, as it was written).

The package ships one table, ``accelbench:published`` (``published_table.json``, written by
``accelbench hub aggregate --published``; a test holds it to the rows it was built from, so that
reading it needs neither torch nor the workloads): the published reference rows
(``reference/published.py``) as bands. Those rows are one machine each (MNIST on an M1 and a P100
server with their CPUs, SimCLR on an A6000, an M1 Pro and an M2), so no key reaches the 10
machines a band needs: the shipped table is built with a documented lower threshold of 1 and every
band is marked ``published`` with its source; with fewer than 5 machines a verdict is "too few
peers", so the shipped table shows where a result stands against the published figures but never
calls it normal or not on their strength alone.
"""

from __future__ import annotations

import fnmatch
import json
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.compare.bands import MIN_MACHINES, PERCENTILES, Band, band_order, band_percentiles
from accelbench.compare.peers import DEVICE_CLASSES, PeerResult, device_class, machine_values, published_peers
from accelbench.errors import UsageError
from accelbench.files import write_atomic
from accelbench.reference.published import EPOCH_REFERENCES
from accelbench.results.key import KEY_DEFAULTS, KEY_FIELDS

BANDS_VERSION = 2
BUILTIN_PUBLISHED = "accelbench:published"
#: Its file in this package (package data; ``accelbench hub aggregate --published`` writes one).
PUBLISHED_FILE = "published_table.json"
#: The shipped table's threshold: a published reference is one machine (see the module's docstring).
PUBLISHED_MIN_MACHINES = 1
_MARK = b'"accelbench_bands"'


def is_band_table(spec: str) -> bool:
    """The built-in table, or a local JSON file that names itself an aggregate table."""
    if spec == BUILTIN_PUBLISHED:
        return True
    path = Path(spec)
    if not path.is_file() or path.suffix != ".json":
        return False
    try:
        with path.open("rb") as handle:
            return _MARK in handle.read(4096)
    except OSError:
        return False


def table_dict(bands: list[Band], sources: list[str], min_machines: int,
               published: str = "") -> dict[str, Any]:
    return {"accelbench_bands": BANDS_VERSION, "accelbench_version": __version__,
            "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "sources": sources,
            "min_machines": min_machines, "published": published,
            "bands": [{"key": dict(zip(KEY_FIELDS, band.key, strict=True)), "device_class": band.device_class,
                       "machines": band.machines, "results": band.results, "first_date": band.first_date,
                       "last_date": band.last_date, "percentiles": list(band.percentiles),
                       "published": band.published, "decode_class": band.decode_class, "recipe": band.recipe,
                       "decode": band.decode} for band in bands]}


def write_table(path: Path, table: dict[str, Any]) -> None:
    try:
        write_atomic(path, json.dumps(table, indent=1, allow_nan=False) + "\n")
    except OSError as error:
        raise UsageError(f"cannot write the aggregate table {path}: {error.strerror or error}") from None


def _key(value: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: 'key' must be an object")
    key = []
    for name in KEY_FIELDS:
        default = KEY_DEFAULTS[name]
        field = value.get(name, default)
        if type(field) is not type(default):
            raise UsageError(f"{where}: key field {name!r} must be a {type(default).__name__}")
        key.append(field)
    return tuple(key)


def _band(item: Any, where: str) -> Band:
    if not isinstance(item, dict):
        raise UsageError(f"{where} must be an object")
    percentiles = item.get("percentiles")
    if not isinstance(percentiles, list) or len(percentiles) != len(PERCENTILES) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in percentiles):
        raise UsageError(f"{where}: 'percentiles' must be {len(PERCENTILES)} numbers (the 1st to 99th)")
    kind = item.get("device_class")
    if kind not in DEVICE_CLASSES:
        raise UsageError(f"{where}: 'device_class' must be one of {', '.join(DEVICE_CLASSES)}")
    counts = [c for c in (item.get("machines"), item.get("results"))
              if isinstance(c, int) and not isinstance(c, bool) and c > 0]
    if len(counts) != 2:
        raise UsageError(f"{where}: 'machines' and 'results' must be positive integers")
    texts = [str(item.get(name) or "")[:400] for name in ("first_date", "last_date", "published",
                                                          "decode_class", "recipe", "decode")]
    return Band(_key(item.get("key"), where), kind, counts[0], counts[1],
                tuple(float(v) for v in percentiles), *texts)


def read_table(spec: str) -> list[Band]:
    """The bands of an aggregate table (or of the shipped published one)."""
    if spec == BUILTIN_PUBLISHED:  # package data (pyproject's package-data ships it)
        shipped = resources.files("accelbench.sharing").joinpath(PUBLISHED_FILE)
        return table_bands(json.loads(shipped.read_text(encoding="utf-8")), spec)
    try:
        data = json.loads(Path(spec).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"cannot read the aggregate table {spec}: {error}") from None
    return table_bands(data, spec)


def table_bands(data: Any, spec: str) -> list[Band]:
    version = data.get("accelbench_bands") if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool):
        raise UsageError(f"{spec} is not an accelbench aggregate table (write one with accelbench hub "
                         "aggregate)")
    if version > BANDS_VERSION:
        raise UsageError(f"the aggregate table {spec} is version {version}, newer than this accelbench reads "
                         f"(<= {BANDS_VERSION}); upgrade accelbench")
    bands = data.get("bands")
    if not isinstance(bands, list):
        raise UsageError(f"{spec}: 'bands' must be a list")
    return [_band(item, f"{spec} band {index + 1}") for index, item in enumerate(bands)]


def _published_workloads(pattern: str) -> list[str]:
    from accelbench.workloads.registry import BUILTIN

    return sorted(name for name in BUILTIN if fnmatch.fnmatchcase(name, pattern))


def _dataset_size(workload: str, mode: str) -> int:
    """The published configuration's samples per epoch (what turns an epoch time into a rate)."""
    from accelbench.workloads.catalogue import get_workload_class

    sizes = get_workload_class(workload).size_presets()["published"].dataset_size
    return int(sizes.get(mode, 0))


def published_bands() -> list[Band]:
    """The published references as bands (threshold PUBLISHED_MIN_MACHINES, marked published)."""
    peers: list[PeerResult] = []
    works = {(workload, ref.mode) for ref in EPOCH_REFERENCES
             for workload in _published_workloads(ref.workload)}
    for workload, mode in sorted(works):
        peers += published_peers(workload, mode, _dataset_size(workload, mode))
    groups: dict[tuple[tuple[Any, ...], str], list[PeerResult]] = {}
    for peer in peers:
        groups.setdefault((peer.key, device_class(peer.device_kind)), []).append(peer)
    bands = []
    for (key, kind), members in groups.items():
        values = machine_values(members)
        if len(values) < PUBLISHED_MIN_MACHINES:
            continue
        citation = "; ".join(dict.fromkeys(p.published for p in members))
        bands.append(Band(key, kind, len(values), len(members), band_percentiles(values), "", "", citation))
    return sorted(bands, key=band_order)


def published_table() -> dict[str, Any]:
    return table_dict(published_bands(), [BUILTIN_PUBLISHED], PUBLISHED_MIN_MACHINES,
                      published="the published reference rows of accelbench/reference/published.py")


assert MIN_MACHINES > PUBLISHED_MIN_MACHINES
