"""Where shared results come from: a bundle file, a folder of bundles, an http(s) address, or a
Hugging Face dataset (``hf://datasets/ORG/NAME[@REVISION][/FOLDER]``, through huggingface_hub).

A source that cannot be read at all is a UsageError (one line, exit 2). Inside a readable source,
a bundle line that cannot be used (malformed, a newer bundle version, a hostile string, a content
hash that does not match its content, a redacted name) costs a one-line warning naming the file and
line, and the rest load. A line that is not a bundle line at all (no "bundle" member: a web page,
random bytes) is counted, never read as a result; a file without any usable bundle line is said to
be no bundle. The same result met twice (same content hash, recomputed) counts once, and so does
one case of one run that its machine shared twice with the same figures (``case_identity``,
``measurement``). Two lines of one machine and case with *different* figures are a **conflict**:
machine and case ids are public, so either may be forged, and which came first (a file's name, a
month folder) is the submitter's choice; both are kept, quarantined out of every band, and
reported, unless signatures settle it (``signing.py``: an unsigned line under a signed machine's
id is refused). Every signed line's signature is verified as it is read: one that does not verify
(a line changed and re-hashed, or signed by another key) is skipped with a warning that names it,
counted under ``signing.BAD_SIGNATURE``, whether or not another line disagrees with it.

For speed over large collections, a caller that only wants some keys passes them: a bundle line
whose raw text names none of the wanted workloads cannot match, and is only checked against its
own content hash (``bundle.intact``, a few microseconds) and counted as *other work*, not as read;
one that fails that quick check is parsed, so that every bad line is counted whatever its work.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.compare.outliers import mark_outliers
from accelbench.compare.peers import PeerResult
from accelbench.errors import UsageError
from accelbench.results.catalogue import headline
from accelbench.sharing.bundle import BUNDLE_MARK, BadLine, intact, read_line, upgrade, verify
from accelbench.sharing.conflicts import Share, resolve
from accelbench.sharing.loaded import Loaded
from accelbench.sharing.peer_view import peer_of
from accelbench.sharing.shards import REFUSED, holds_shards, remote_hf_shards, shard_files
from accelbench.sharing.signing import claims_signature, verify_signature

SOURCE_HELP = ("a bundle file, a folder of bundles (*.jsonl), an http(s) address of a bundle, or a "
               "Hugging Face dataset hf://datasets/ORG/NAME")
HTTP_TIMEOUT_S = 30.0
#: Warnings per source before the rest are counted in one line.
MAX_WARNINGS = 20
_HF = re.compile(r"hf://datasets/([^/@\s]+)/([^/@\s]+)(?:@([^/\s]+))?(?:/(.*))?")
Warn = Callable[[str], None]


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


def hf_folder(spec: str, patterns: tuple[str, ...] = ("*.jsonl",)) -> Path:
    """The local folder of a Hugging Face dataset: downloaded (only the files of ``patterns``) or,
    offline (HF_HUB_OFFLINE=1), taken from the local cache."""
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
                                  allow_patterns=list(patterns))
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


def bundle_files(folder: Path) -> list[Path]:
    """The bundles in a folder, recursively: not a compacted hub's list of refused lines, nothing in
    a hidden folder (work in progress)."""
    return sorted(p for p in folder.rglob("*.jsonl") if p.is_file() and p.name != REFUSED
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def _folder_documents(folder: Path, spec: str) -> Iterator[tuple[str, Iterator[tuple[int, bytes]]]]:
    if not folder.is_dir():
        raise UsageError(f"source {spec}: {folder} is not a folder")
    files = bundle_files(folder)
    if not files:
        raise UsageError(f"source {spec} holds no bundles (*.jsonl files)")
    for file in files:
        yield str(file), _file_lines(file)


def split_sources(specs: Iterable[str]) -> tuple[list[str], list[str]]:
    """(bundle sources, Parquet shard files): a folder may hold both (shards, and the bundles
    submitted since they were compacted); a Hugging Face dataset is fetched with both kinds."""
    bundles: list[str] = []
    shards: list[str] = []
    for spec in specs:
        if spec.startswith("hf://"):
            match = _HF.fullmatch(spec)
            remote = remote_hf_shards(*match.groups()) if match else None
            folder = hf_folder(spec, ("*.jsonl",) if remote is not None else ("*.jsonl", "*.parquet"))
            if remote is not None:
                found = remote
            else:
                found = [str(p) for p in shard_files(folder)] if folder.is_dir() else []
            shards += found
            if not found or bundle_files(folder):
                bundles.append(str(folder))
        elif holds_shards(spec):
            path = Path(spec)
            shards += [str(p) for p in shard_files(path)] if path.is_dir() else [spec]
            if path.is_dir() and bundle_files(path):
                bundles.append(spec)
        else:
            bundles.append(spec)
    return bundles, shards


def load_collection(specs: list[str], warn: Warn, keys: set[tuple[Any, ...]] | None = None,
                    settings_for: set[str] | None = None) -> tuple[Loaded, list[str]]:
    """The bundle results of ``specs`` (``load_peers``) and the Parquet shard files to query."""
    bundles, shards = split_sources(specs)
    loaded = load_peers(bundles, warn, keys, settings_for) if bundles else Loaded()
    loaded.sources, loaded.shard_files = list(specs), len(shards)
    return loaded, shards


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


def case_identity(line: dict[str, Any]) -> str:
    """The case a line is (the same machine sharing it again is a duplicate): its case_id, or for
    a line without one its key, device model and figures."""
    case = line.get("case_id")
    if isinstance(case, str) and case:
        return case
    figures = line.get("figures") or {}
    mode = str((line.get("key") or {}).get("mode", ""))
    fallback = [line.get("key"), (line.get("device") or {}).get("model"), figures.get(headline(mode).name),
                figures.get("rate_ci")]
    return "f" + hashlib.sha256(json.dumps(fallback, sort_keys=True).encode()).hexdigest()[:15]


def parse_result(raw: bytes, keys: set[tuple[Any, ...]] | None = None,
                 settings_for: set[str] | None = None) -> tuple[PeerResult | None, dict[str, Any]]:
    """The line's peer (None: a result that did not finish, or of another key) and the line as
    the current version; BadLine (with its reason) when it cannot be used. The hash is recomputed,
    a signature's key checked against the machine id (``signing.claims_signature``) and the
    signature verified (``signing.verify_signature``; not where ``cryptography`` is missing): a
    forged or tampered line never reaches the duplicate check."""
    try:
        text = raw.decode("utf-8")
        as_written = read_line(text)
        line = upgrade(as_written)
        peer = peer_of(line, settings_for)
        verify(as_written, text)
        if claims_signature(as_written):
            verify_signature(as_written)
        if peer is None or (keys is not None and peer.key not in keys):
            return None, line
        return peer, line
    except UnicodeDecodeError:
        raise BadLine("not UTF-8 text") from None
    except BadLine:
        raise
    except (AttributeError, TypeError, KeyError, ValueError) as other:
        raise BadLine(f"malformed ({type(other).__name__})") from None


@dataclass
class _Read:
    """One document read: its usable results (each with the case it is), and what was skipped."""

    peers: list[Share] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    total: int = 0
    usable: int = 0
    other_work: int = 0
    not_bundle: int = 0


def _read(name: str, lines: Iterable[tuple[int, bytes]], keys: set[tuple[Any, ...]] | None,
          settings_for: set[str] | None, needles: list[bytes] | None) -> _Read:
    read, warned = _Read(), 0
    for number, raw in lines:
        if not raw.strip():
            continue
        read.total += 1
        if not _is_bundle_line(raw):
            read.not_bundle += 1
            continue
        other = needles is not None and not any(needle in raw for needle in needles)
        if other and intact(raw.decode("utf-8", "replace")):
            read.other_work += 1  # of other work (it cannot match), and its hash holds: passed over
            continue
        try:
            peer, line = parse_result(raw, None if other else keys, settings_for)
        except BadLine as error:
            read.skipped[error.reason] += 1
            warned += 1
            if warned <= MAX_WARNINGS:
                read.warnings.append(f"{name} line {number} skipped: {error}")
            continue
        if other:
            read.other_work += 1
            continue
        read.usable += 1
        if peer is not None:
            # The same case of the same run, shared again by its machine, is one result.
            case = f"{peer.machine_id}\0{case_identity(line)}" if peer.machine_id else ""
            read.peers.append(Share(peer, case, _signed(line), name, number))
    if warned > MAX_WARNINGS:
        read.warnings.append(f"{name}: {warned - MAX_WARNINGS} more lines skipped")
    return read


def _signed(line: dict[str, Any]) -> tuple[str, str] | None:
    key, signature = line.get("public_key"), line.get("signature")
    return (key, signature) if isinstance(key, str) and isinstance(signature, str) else None


def _read_file(task: tuple[str, set[tuple[Any, ...]] | None, set[str] | None, list[bytes] | None]) -> _Read:
    name, keys, settings_for, needles = task
    return _read(name, _file_lines(Path(name)), keys, settings_for, needles)


#: Bundles larger than this in all are read by several processes (where the OS can fork).
PARALLEL_BYTES = 16 * 2**20


def _fork_is_safe() -> bool:
    """Forking is cheap and safe on Linux, and not after a run loaded torch (run --against: a
    device runtime may hold threads and handles a forked child must not touch)."""
    return sys.platform == "linux" and "torch" not in sys.modules


def _reads(spec: str, keys: set[tuple[Any, ...]] | None, settings_for: set[str] | None,
           needles: list[bytes] | None) -> Iterator[tuple[str, _Read]]:
    """Each document of ``spec`` read, in order; a large local collection by a process per CPU
    (a line costs tens of microseconds of Python: two CPUs read it in about half the time)."""
    docs = list(documents(spec))
    files = [name for name, _ in docs if Path(name).is_file()]
    workers = min(os.cpu_count() or 1, 8, len(files))
    if (workers > 1 and len(files) == len(docs) and _fork_is_safe()
            and sum(Path(name).stat().st_size for name in files) > PARALLEL_BYTES):
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            tasks = [(name, keys, settings_for, needles) for name in files]
            yield from zip(files, pool.map(_read_file, tasks, chunksize=max(1, len(files) // (workers * 4))),
                           strict=True)
        return
    for name, lines in docs:
        yield name, _read(name, lines, keys, settings_for, needles)


def load_peers(specs: Iterable[str], warn: Warn, keys: set[tuple[Any, ...]] | None = None,
               settings_for: set[str] | None = None) -> Loaded:
    """Every usable result of the sources (only those of ``keys`` when given), once each; the
    recorded settings only of the device models in ``settings_for`` (model_key) when given.

    Every line is accounted for (``Loaded.summary``); a skipped bundle line costs a warning that
    names it (at most MAX_WARNINGS per file); a file with no usable bundle line at all is said
    to be no bundle."""
    loaded, seen, shares = Loaded(), set(), []
    needles = _needles({key[0] for key in keys} if keys is not None else None)
    for spec in specs:
        loaded.sources.append(spec)
        for name, read in _reads(spec, keys, settings_for, needles):
            for message in read.warnings:
                warn(message)
            for share in read.peers:
                if share.peer.content_hash in seen:
                    loaded.duplicates += 1
                    continue
                seen.add(share.peer.content_hash)
                shares.append(share)
            loaded.skipped.update(read.skipped)
            loaded.lines += read.usable
            loaded.other_work += read.other_work
            loaded.not_bundle += read.not_bundle
            _say_what_was_not_a_bundle(name, read.total, read.usable + read.other_work, read.not_bundle, warn)
    resolved = resolve(shares, warn)
    loaded.cases = {s.peer.content_hash: s.case.partition("\0")[2] for s in shares if s.case}
    loaded.signed = {s.peer.content_hash for s in shares if s.signed is not None}
    loaded.duplicates += resolved.duplicates
    loaded.skipped.update(resolved.refused)
    loaded.unsigned = resolved.unsigned
    # Quarantined here, so that every caller (and its count) sees the same machines.
    loaded.peers = mark_outliers(resolved.peers)
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
