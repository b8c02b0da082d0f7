"""Where shared results come from: a bundle file, a folder of bundles, an http(s) address, or a
Hugging Face dataset (``hf://datasets/ORG/NAME[@REVISION][/FOLDER]``, through huggingface_hub).

A source that cannot be read at all is a UsageError (one line, exit 2). Inside a readable source,
a line that cannot be used (malformed, a newer bundle version, a hostile string) costs a one-line
warning naming the file and line, and the rest load. The same result met twice (same content hash)
counts once.

For speed over large collections, a caller that only wants some keys passes them: a line whose raw
text names none of the wanted workloads is passed over without being parsed (it cannot match).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.compare.peers import PeerResult
from accelbench.errors import UsageError
from accelbench.sharing.bundle import BadLine, parse_line
from accelbench.sharing.peer_view import peer_of

SOURCE_HELP = ("a bundle file, a folder of bundles (*.jsonl), an http(s) address of a bundle, or a "
               "Hugging Face dataset hf://datasets/ORG/NAME")
HTTP_TIMEOUT_S = 30.0
#: Warnings per source before the rest are counted in one line.
MAX_WARNINGS = 20
_HF = re.compile(r"hf://datasets/([^/@\s]+)/([^/@\s]+)(?:@([^/\s]+))?(?:/(.*))?")
Warn = Callable[[str], None]


@dataclass
class Loaded:
    """What the sources gave: the peers, and how many lines were read, skipped and duplicates."""

    peers: list[PeerResult] = field(default_factory=list)
    lines: int = 0
    skipped: int = 0
    duplicates: int = 0
    sources: list[str] = field(default_factory=list)


def _lines_of_bytes(chunks: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    for number, raw in enumerate(chunks, 1):
        yield number, raw.rstrip(b"\r\n")


def _file_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        with path.open("rb") as handle:
            yield from _lines_of_bytes(handle)
    except OSError as error:
        raise UsageError(f"cannot read bundle {path}: {error.strerror or error}") from None


def _http_lines(address: str) -> Iterator[tuple[int, bytes]]:
    request = urllib.request.Request(address, headers={"User-Agent": f"accelbench/{__version__}"})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:  # noqa: S310
            body = response.read()
    except urllib.error.HTTPError as error:
        raise UsageError(f"cannot read source {address}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise UsageError(f"cannot read source {address}: {reason}") from None
    yield from _lines_of_bytes(body.split(b"\n"))


def hf_folder(spec: str) -> Path:
    """The local folder of a Hugging Face dataset: downloaded (only the *.jsonl files) or, offline
    (HF_HUB_OFFLINE=1), taken from the local cache."""
    match = _HF.fullmatch(spec)
    if match is None:
        raise UsageError(f"source {spec!r} is not hf://datasets/ORG/NAME[@REVISION][/FOLDER]")
    org, name, revision, folder = match.groups()
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise UsageError(f"source {spec} needs huggingface_hub: pip install 'accelbench[hub]'") from None
    try:
        local = snapshot_download(f"{org}/{name}", repo_type="dataset", revision=revision or None,
                                  allow_patterns=["*.jsonl"])
    except Exception as error:  # the hub's errors are many classes; each says what went wrong
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise UsageError(f"cannot read source {spec}: {type(error).__name__}: {first}") from None
    return Path(local) / (folder or "")


def documents(spec: str) -> Iterator[tuple[str, Iterator[tuple[int, bytes]]]]:
    """(name shown in warnings, its numbered lines) for each bundle of the source."""
    if spec.startswith(("http://", "https://")):
        yield spec, _http_lines(spec)
        return
    if spec.startswith("hf://"):
        yield from _folder_documents(hf_folder(spec), spec)
        return
    path = Path(spec)
    if path.is_dir():
        yield from _folder_documents(path, spec)
    elif path.is_file():
        yield str(path), _file_lines(path)
    else:
        raise UsageError(f"source {spec!r} is not {SOURCE_HELP}")


def check_sources(specs: Iterable[str]) -> None:
    """Fail early on a local source that is not there (an address is only known when read)."""
    for spec in specs:
        if spec.startswith("hf://"):
            if _HF.fullmatch(spec) is None:
                raise UsageError(f"source {spec!r} is not hf://datasets/ORG/NAME[@REVISION][/FOLDER]")
        elif not spec.startswith(("http://", "https://")) and not Path(spec).exists():
            raise UsageError(f"source {spec!r} is not {SOURCE_HELP}")


def _folder_documents(folder: Path, spec: str) -> Iterator[tuple[str, Iterator[tuple[int, bytes]]]]:
    if not folder.is_dir():
        raise UsageError(f"source {spec}: {folder} is not a folder")
    files = sorted(p for p in folder.rglob("*.jsonl") if p.is_file())
    if not files:
        raise UsageError(f"source {spec} holds no bundles (*.jsonl files)")
    for file in files:
        yield str(file), _file_lines(file)


def _needles(workloads: set[str] | None) -> list[bytes] | None:
    if workloads is None:
        return None
    needles: set[bytes] = set()
    for name in workloads:
        needles.add(json.dumps(name).encode())
        needles.add(json.dumps(name, ensure_ascii=False).encode("utf-8"))
    return sorted(needles)


def load_peers(specs: Iterable[str], warn: Warn, keys: set[tuple[Any, ...]] | None = None,
               settings_for: set[str] | None = None) -> Loaded:
    """Every usable result of the sources (only those of ``keys`` when given), once each; the
    recorded settings only of the device models in ``settings_for`` (model_key) when given."""
    loaded, seen = Loaded(), set()
    needles = _needles({key[0] for key in keys} if keys is not None else None)
    for spec in specs:
        loaded.sources.append(spec)
        for name, lines in documents(spec):
            warned = 0
            for number, raw in lines:
                if not raw.strip():
                    continue
                loaded.lines += 1
                if needles is not None and not any(needle in raw for needle in needles):
                    continue
                try:
                    line = parse_line(raw.decode("utf-8"))
                    peer = peer_of(line, settings_for)
                except UnicodeDecodeError:
                    reason = "not UTF-8 text"
                except BadLine as error:
                    reason = str(error)
                except (AttributeError, TypeError, KeyError, ValueError) as error:
                    reason = f"malformed ({type(error).__name__})"
                else:
                    if peer is None or (keys is not None and peer.key not in keys):
                        continue
                    if peer.content_hash in seen:
                        loaded.duplicates += 1
                        continue
                    seen.add(peer.content_hash)
                    loaded.peers.append(peer)
                    continue
                loaded.skipped += 1
                warned += 1
                if warned <= MAX_WARNINGS:
                    warn(f"{name} line {number} skipped: {reason}")
            if warned > MAX_WARNINGS:
                warn(f"{name}: {warned - MAX_WARNINGS} more lines skipped")
    return loaded
