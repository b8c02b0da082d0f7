"""The bundle format: JSON lines, one shared result per line, each line versioned on its own.

A line is self-contained so that bundles can be concatenated, split and collected in a folder or
a dataset without a header to keep in step. Its sections (version 1)::

    bundle       the line's format version (BUNDLE_VERSION); a newer one is refused, an older one
                 upgraded through _UPGRADES (the history below)
    hash         sha256 of the result's content (everything but hash, machine_id and samples), so
                 the same result shared twice, with or without samples, counts once
    machine_id   a random id per install (sharing/machine_id.py): one machine's results group
    accelbench_version, date (YYYY-MM-DD of the run), status
    key          every field of the comparability key (results/key.py)
    device       kind, model, count, memory_bytes, and compute_capability / driver where known
    host         os, os_release, cpu, cores, memory_bytes, python
    software     torch, cuda, hip, cudnn, blas
    settings     backend_flags (TF32, cudnn.benchmark ...), threads, loader_workers, power (each
                 fact's value, or null where the OS did not say)
    figures      samples_per_s, its CI, median/p10/mean step, rel_iqr, epoch_s and epoch_kind,
                 dataset_size, measured_steps, peak_memory_bytes, input_fraction
    validity     selftest (passed | failed | not run), its date and groups, noisy, drift,
                 precision_reached, stop_reason
    processes    with --repeat: one summary per worker process (status, median/p10/mean step)
    samples      only with --with-samples: the step times, one list per process

Format history (bump BUNDLE_VERSION and add _UPGRADES[old] for a change a reader would misread):

  1  the first format.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any

BUNDLE_VERSION = 1
#: Not part of a result's content: who shared it, and the raw samples that may or may not ride along.
_NOT_HASHED = ("hash", "machine_id", "samples")
_HASH = re.compile(r"[0-9a-f]{64}")
#: Longest string a line may carry (device models and version strings are far shorter).
MAX_STRING = 200
#: Characters no honest result holds: terminal control, markup, bidirectional overrides and
#: invisible characters, raw or as JSON escapes. Checked on the raw line (one C-level search).
_HOSTILE = re.compile(
    r"[\x00-\x1f\x7f<>\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
    r"|\\[bfnrt]|\\u00[01][0-9a-fA-F]|\\u007[fF]|\\u003[cCeE]|\\u200[b-fB-F]|\\u202[a-eA-E]"
    r"|\\u206[0-9]|\\u[fF][eE][fF][fF]")


class BadLine(ValueError):
    """A line that is skipped: the message says why, in a few words."""


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_hash(line: dict[str, Any]) -> str:
    content = {name: value for name, value in line.items() if name not in _NOT_HASHED}
    return hashlib.sha256(canonical(content).encode("utf-8")).hexdigest()


def dump_line(line: dict[str, Any]) -> str:
    """One line of a bundle (no newline), with its content hash filled in."""
    line = {"bundle": BUNDLE_VERSION, "hash": "", **line}
    line["hash"] = content_hash(line)
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _upgrade(data: dict[str, Any]) -> dict[str, Any]:
    version = data.get("bundle")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadLine("no integer 'bundle' version: not an accelbench bundle line")
    if version > BUNDLE_VERSION:
        raise BadLine(f"bundle version {version} is newer than this accelbench reads "
                      f"(<= {BUNDLE_VERSION}); upgrade accelbench")
    for step in range(version, BUNDLE_VERSION):
        data = _UPGRADES[step](data)
        data["bundle"] = step + 1
    return data


def parse_line(text: str) -> dict[str, Any]:
    """A bundle line as a dict of the current version; BadLine says why it cannot be used."""
    # Most lines are plain ASCII with no escape and no markup: then nothing can be hostile, and the
    # regular expression (the costliest step of loading a large collection) is not needed.
    plain = text.isascii() and "\\" not in text and "<" not in text and ">" not in text and "\x7f" not in text
    hostile = None if plain else _HOSTILE.search(text)
    if hostile:
        raise BadLine(f"hostile string (holds {hostile.group()!r}: control, markup or invisible "
                      "characters)")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise BadLine(f"not valid JSON ({getattr(error, 'msg', error)})") from None
    if not isinstance(data, dict):
        raise BadLine(f"a line must be a JSON object, got {type(data).__name__}")
    data = _upgrade(data)
    digest = data.get("hash")
    if not isinstance(digest, str) or not _HASH.fullmatch(digest):
        raise BadLine("no content hash (64 lowercase hex digits)")
    return data


def section(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name)
    if not isinstance(value, dict):
        raise BadLine(f"field {name!r} must be an object")
    return value


def text(value: Any, where: str, default: str | None = None) -> str:
    """A string field, checked: short, printable (the raw-line search already refused controls)."""
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise BadLine(f"field {where!r} must be a string")
    if len(value) > MAX_STRING:
        raise BadLine(f"field {where!r} is longer than {MAX_STRING} characters")
    return value


def number(value: Any, where: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise BadLine(f"field {where!r} must be a finite number")
    return float(value)


#: _UPGRADES[v] turns a version-v line into a version-(v+1) one.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}
assert sorted(_UPGRADES) == list(range(1, BUNDLE_VERSION)), "every older version needs its step"
