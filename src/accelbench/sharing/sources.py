"""Where shared results come from: a bundle file, a folder of bundles, an http(s) address, or a
Hugging Face dataset (``hf://datasets/ORG/NAME[@REVISION][/FOLDER]``, through huggingface_hub).

A source that cannot be read at all is a UsageError (one line, exit 2). Inside a readable source,
a bundle line that cannot be used (malformed, a newer bundle version, a hostile string, a content
hash that does not match its content, a redacted name) costs a one-line warning naming the file and
line, and the rest load. A line that is not a bundle line at all (no "bundle" member: a web page,
random bytes) is counted, never read as a result; a file without any usable bundle line is said to
be no bundle. The same result met twice (same content hash, recomputed) counts once.

For speed over large collections, a caller that only wants some keys passes them: a bundle line
whose raw text names none of the wanted workloads is passed over without being parsed (it cannot
match), and counted as read.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.compare.peers import PeerResult
from accelbench.errors import UsageError
from accelbench.sharing.bundle import BUNDLE_MARK, BadLine, read_line, upgrade, verify
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
    """What the sources gave: the peers, and every line accounted for: bundle lines read (used,
    or of other work and passed over), bundle lines skipped by reason, duplicates, and lines that
    are not accelbench bundle lines at all."""

    peers: list[PeerResult] = field(default_factory=list)
    #: Bundle lines read and usable (or of other work, passed over unparsed).
    lines: int = 0
    #: Bundle lines that could not be used, by reason (bundle.py's and peer_view.py's kinds).
    skipped: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    #: Lines that are not accelbench bundle lines (no "bundle" member: a web page, random bytes).
    not_bundle: int = 0
    sources: list[str] = field(default_factory=list)

    @property
    def invalid(self) -> int:
        return sum(1 for peer in self.peers if peer.invalid)

    def summary(self) -> str:
        """One line saying what was read and what was left out, and why."""
        words = [f"read {self.lines:,} shared result(s) from {len(self.sources)} source(s)"]
        if self.skipped:
            reasons = ", ".join(f"{count:,} {reason}" for reason, count in self.skipped.most_common())
            words.append(f"skipped {sum(self.skipped.values()):,} bundle line(s) ({reasons})")
        if self.not_bundle:
            words.append(f"skipped {self.not_bundle:,} line(s) that are not accelbench bundle lines")
        if self.duplicates:
            words.append(f"{self.duplicates:,} duplicate(s) counted once")
        if self.invalid:
            words.append(f"{self.invalid:,} flagged invalid (a figure above its device's measured "
                         "ceiling; kept out of every band)")
        return "; ".join(words)


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


def _is_bundle_line(raw: bytes) -> bool:
    return BUNDLE_MARK in raw


def _usable(raw: bytes, keys: set[tuple[Any, ...]] | None,
            settings_for: set[str] | None) -> tuple[PeerResult | None, str]:
    """The line's peer (None: a result that did not finish, or of another key) and its content
    hash; BadLine (or a decoding error) when it cannot be used. The hash is recomputed only for
    a line that will be used: a forged line never reaches the duplicate check."""
    text = raw.decode("utf-8")
    as_written = read_line(text)
    peer = peer_of(upgrade(as_written), settings_for)
    if peer is None or (keys is not None and peer.key not in keys):
        return None, ""
    verify(as_written, text)
    return peer, peer.content_hash


def load_peers(specs: Iterable[str], warn: Warn, keys: set[tuple[Any, ...]] | None = None,
               settings_for: set[str] | None = None) -> Loaded:
    """Every usable result of the sources (only those of ``keys`` when given), once each; the
    recorded settings only of the device models in ``settings_for`` (model_key) when given.

    Every line is accounted for (``Loaded.summary``); a skipped bundle line costs a warning that
    names it (at most MAX_WARNINGS per file); a file with no usable bundle line at all is said
    to be no bundle."""
    loaded, seen = Loaded(), set()
    needles = _needles({key[0] for key in keys} if keys is not None else None)
    for spec in specs:
        loaded.sources.append(spec)
        for name, lines in documents(spec):
            warned = total = usable = not_bundle = 0
            for number, raw in lines:
                if not raw.strip():
                    continue
                total += 1
                if not _is_bundle_line(raw):
                    not_bundle += 1
                    continue
                if needles is not None and not any(needle in raw for needle in needles):
                    usable += 1  # a bundle line of other work: passed over unparsed (it cannot match)
                    continue
                try:
                    peer, digest = _usable(raw, keys, settings_for)
                except UnicodeDecodeError:
                    error = BadLine("not UTF-8 text")
                except BadLine as bad:
                    error = bad
                except (AttributeError, TypeError, KeyError, ValueError) as other:
                    error = BadLine(f"malformed ({type(other).__name__})")
                else:
                    usable += 1
                    if peer is None:
                        continue
                    if digest in seen:
                        loaded.duplicates += 1
                        continue
                    seen.add(digest)
                    loaded.peers.append(peer)
                    continue
                loaded.skipped[error.reason] += 1
                warned += 1
                if warned <= MAX_WARNINGS:
                    warn(f"{name} line {number} skipped: {error}")
            if warned > MAX_WARNINGS:
                warn(f"{name}: {warned - MAX_WARNINGS} more lines skipped")
            loaded.lines += usable
            loaded.not_bundle += not_bundle
            _say_what_was_not_a_bundle(name, total, usable, not_bundle, warn)
    return loaded


def _say_what_was_not_a_bundle(name: str, total: int, usable: int, not_bundle: int, warn: Warn) -> None:
    if total == 0:
        warn(f"{name} is empty: no accelbench bundle line in it")
    elif usable == 0 and not_bundle == total:
        warn(f"{name} is not an accelbench bundle: none of its {total:,} line(s) is a bundle line "
             "(give a file written by accelbench share)")
    elif usable == 0:
        warn(f"{name}: no usable accelbench bundle line ({total:,} line(s), each skipped)")
    elif not_bundle:
        warn(f"{name}: {not_bundle:,} line(s) that are not accelbench bundle lines skipped")
