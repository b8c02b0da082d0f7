"""The bundle format: JSON lines, one shared result per line, each line versioned on its own.

A line is self-contained so that bundles can be concatenated, split and collected in a folder or
a dataset without a header to keep in step. Its sections (version 2)::

    bundle       the line's format version (BUNDLE_VERSION); a newer one is refused, an older one
                 upgraded through _UPGRADES (the history below)
    hash         sha256 of the result's content (everything but hash, machine_id and samples) as
                 canonical JSON (sorted keys, no spaces), so the same result shared twice, with or
                 without samples, counts once. Recomputed on read: a line whose content no longer
                 matches its hash is skipped (it can never shadow the genuine line as its
                 "duplicate"). The writer puts hash, machine_id and samples first and then the
                 content in its canonical form, so a reader can hash the line's own text (a few
                 microseconds) instead of serialising it again (tens)
    machine_id   a random id per install (sharing/machine_id.py): one machine's results group
    case_id      a digest of the run id, device and key: the same case of the same run shared
                 again (its validity changed, a newer accelbench) is recognised as one result
                 (optional: readers take the key, device model and figures where it is missing)
    accelbench_version, date (YYYY-MM-DD of the run), status
    rate_unit    what the headline rate counts (CaseResult.rate_unit: "samples/s", "decode tokens/s",
                 or a --protocol case's own: "tg tokens/s (llama-bench)" ...)
    key          every field of the comparability key (results/key.py KEY_FIELDS, derived)
    device       kind, model, count, memory_bytes, and compute_capability / driver where known
    limits       the device's measured ceilings the figures are held against, where the case had
                 them: bandwidth_bytes_per_s (roofline), last_level_cache_bytes, peak_flops and,
                 where that peak was marked, peak_limited_by (what held its clock: capped),
                 peak_busy (why it was measured beside other work), peak_recheck_busy (why its
                 latest re-check was)
    host         os, os_release, cpu, cores, memory_bytes, python
    software     torch, cuda, hip, cudnn, blas
    settings     backend_flags (TF32, cudnn.benchmark ...), threads, loader_workers, power (each
                 fact's value, or null where the OS did not say)
    figures      every catalogue figure of the case's mode by name (results/catalogue.py; null
                 where absent): the headline rate (catalogue.headline, from the key: samples_per_s,
                 a generation case's decode_tokens_per_s_total, a --protocol case's peer's rate:
                 pp/tg_tokens_per_s, gpt_fast_tokens_per_s, mlperf_token_rate), TTFT, TPOT,
                 sustained, first use
                 ...; then rate_ci (the headline's 95% interval), p10/mean step, rel_iqr,
                 epoch_kind, dataset_size, measured_steps, steps_per_sample
    validity     selftest (passed | failed | not run), its date and groups, noisy, drift,
                 precision_reached, stop_reason; a generation case's tokens_hash,
                 tokens_reference_hash, tokens_match, tokens_verdict and, where its tokens
                 differ, tokens_first_difference and tokens_reference_margin
    decode       a finished generation line's decode diagnosis, where its result recorded one
                 (compare/decode_diagnosis.py): decode_bound ("overhead" | "bandwidth"),
                 decode_bound_words, host_cpu (the CPU model that drove it: an overhead-bound
                 line is compared only with lines of the same one), execution (kv_cache, compile,
                 prefill, decode, cuda_graphs, settings) and, quantized, the kernel that ran; its
                 floor is in figures (decode_floor_s, decode_floor_ratio). Optional: a line
                 without it (older) is read as not judged
    overall      a --protocol mlperf-client line's figures across cases, stored with its run
                 (results/protocol_overall.py: MLPerf Client's overall geometric means over its
                 categories, ``mlperf_ttft_geomean_s`` and ``mlperf_token_rate_geomean``, with
                 protocol, label, device, categories and missing, as ``run --json`` shows them)
                 and ``group_id`` (a digest naming the group, not the run): a figure of the run,
                 not of the case, carried whole by every line of its group so that each line
                 stays self-contained; a reader counts a group once. Optional, in version 2: an
                 older reader ignores it (it is content, so the hash and a signature cover it),
                 and a reader takes a line without it, or with one it cannot read, as carrying none
    processes    with --repeat: one summary per worker process (status, median/p10/mean step)
    samples      only with --with-samples: the step times, one list per process

Format history (bump BUNDLE_VERSION and add _UPGRADES[old] for a change a reader would misread):

  1  the first format.
  2  the key carries every KEY_FIELDS field (1 lacked prompt_len and new_tokens: upgraded as 0,
     "not generation"); figures are the catalogue's, the headline read by its name; rate_unit;
     limits. A version-1 generation line is not comparable (its key lacks the lengths and its
     samples_per_s was batch / the median token gap, not decode tokens/s): skipped, counted.
     Sections added since without a bump (decode, overall) are optional: a reader that
     predates one reads the line as before, so none is a change a reader would misread; a bump
     would make every older reader refuse the new lines as "newer format".
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any

BUNDLE_VERSION = 2
#: Not part of a result's content: who shared it (and its key and signature: ``signing.py``), and the
#: raw samples that may or may not ride along.
_NOT_HASHED = ("hash", "machine_id", "samples", "public_key", "signature")
_HASH = re.compile(r"[0-9a-f]{64}")
#: Longest string a line may carry (device models and version strings are far shorter).
MAX_STRING = 200
#: Characters no honest result holds: terminal control, markup, bidirectional overrides and
#: invisible characters, raw or as JSON escapes. Checked on the raw line (one C-level search).
_HOSTILE = re.compile(
    r"[\x00-\x1f\x7f<>\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
    r"|\\[bfnrt]|\\u00[01][0-9a-fA-F]|\\u007[fF]|\\u003[cCeE]|\\u200[b-fB-F]|\\u202[a-eA-E]"
    r"|\\u206[0-9]|\\u[fF][eE][fF][fF]")
#: Every bundle line names its version: a line without this text is not a bundle line at all
#: (an HTML page, random bytes), told apart without parsing it.
BUNDLE_MARK = b'"bundle"'

# Why a bundle line was skipped, in the few words a summary counts them by.
MALFORMED = "malformed"
NEWER = "newer format"
HOSTILE = "hostile string"
HASH_MISMATCH = "hash mismatch"
OLD_GENERATION = "version-1 generation line"


class BadLine(ValueError):
    """A line that is skipped: the message says why, in a few words; ``reason`` is its kind."""

    def __init__(self, message: str, reason: str = MALFORMED) -> None:
        super().__init__(message)
        self.reason = reason


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_hash(line: dict[str, Any]) -> str:
    content = {name: value for name, value in line.items() if name not in _NOT_HASHED}
    return hashlib.sha256(canonical(content).encode("utf-8")).hexdigest()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def dump_line(line: dict[str, Any]) -> str:
    """One line of a bundle (no newline), with its content hash filled in: the members that are
    not content first, then the content exactly as it was hashed (see ``verify``)."""
    body = canonical({"bundle": BUNDLE_VERSION,
                      **{name: value for name, value in line.items() if name not in _NOT_HASHED}})
    head = {"hash": _sha256(body), **{name: line[name] for name in _NOT_HASHED[1:] if name in line}}
    return json.dumps(head, separators=(",", ":"), ensure_ascii=False, allow_nan=False)[:-1] + "," + body[1:]


def read_line(text: str) -> dict[str, Any]:
    """A bundle line as written (its own version, not upgraded, its hash not yet recomputed);
    BadLine says why it cannot be used."""
    # Most lines are plain ASCII with no escape and no markup: then nothing can be hostile, and the
    # regular expression (the costliest step of loading a large collection) is not needed.
    plain = text.isascii() and "\\" not in text and "<" not in text and ">" not in text and "\x7f" not in text
    hostile = None if plain else _HOSTILE.search(text)
    if hostile:
        raise BadLine(f"hostile string (holds {hostile.group()!r}: control, markup or invisible "
                      "characters)", HOSTILE)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise BadLine(f"not valid JSON ({getattr(error, 'msg', error)})") from None
    if not isinstance(data, dict):
        raise BadLine(f"a line must be a JSON object, got {type(data).__name__}")
    version = data.get("bundle")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadLine("no integer 'bundle' version: not an accelbench bundle line")
    if version > BUNDLE_VERSION:
        raise BadLine(f"bundle version {version} is newer than this accelbench reads "
                      f"(<= {BUNDLE_VERSION}); upgrade accelbench", NEWER)
    digest = data.get("hash")
    if not isinstance(digest, str) or not _HASH.fullmatch(digest):
        raise BadLine("no content hash (64 lowercase hex digits)")
    return data


#: The head ``dump_line`` writes before the canonical content: hash, machine id, raw samples
#: (numbers only). A line in this form is verified on its own text.
_HEAD = re.compile(r'\{"hash":"([0-9a-f]{64})"(?:,"machine_id":"[0-9a-f]*")?'
                   r'(?:,"samples":\[[-+0-9eE.,\[\]]*\])?'
                   r'(?:,"public_key":"[0-9a-f]{64}")?(?:,"signature":"[0-9a-f]{128}")?,')


def verify(data: dict[str, Any], text: str | None = None) -> None:
    """Recompute the content hash of a line as read (before any upgrade: the hash is over the
    content its writer wrote): a line changed after it was shared is refused.

    With the line's ``text`` in ``dump_line``'s form, the text after its head is hashed as it
    stands: if it matches, those bytes are the content (the head's hash must be the one the line
    reads as, so a second "hash" member further on cannot pose as another line's). Any other
    form (an older writer's, another tool's) is serialised canonically and hashed."""
    head = _HEAD.match(text) if text is not None else None
    if head is not None and text is not None and head.group(1) == data["hash"] \
            and _sha256("{" + text[head.end():]) == data["hash"]:
        return
    try:
        recomputed = content_hash(data)
    except ValueError:  # a number JSON allows but a canonical dump refuses (1e999 read as inf)
        raise BadLine("a number that is not finite") from None
    if recomputed != data["hash"]:
        raise BadLine("content hash does not match the line's content (changed after it was "
                      "shared)", HASH_MISMATCH)


def intact(text: str) -> bool:
    """Whether a line in ``dump_line``'s form, plain (nothing ``read_line`` would call hostile),
    hashes to its own head's hash, checked without parsing it (a few microseconds). False says
    only that this quick check cannot tell: ``parse_line`` says why, if anything is wrong."""
    head = _HEAD.match(text)
    if head is None or not (text.isascii() and "\\" not in text and "<" not in text and ">" not in text
                            and "\x7f" not in text):
        return False
    return _sha256("{" + text[head.end():]) == head.group(1)


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """A line read by ``read_line`` as the current version (a new dict: ``data`` is untouched,
    so its hash can still be verified after)."""
    for step in range(data["bundle"], BUNDLE_VERSION):
        data = {**_UPGRADES[step](data), "bundle": step + 1}
    return data


def parse_line(text: str) -> dict[str, Any]:
    """A bundle line as a dict of the current version, its hash verified; BadLine says why it
    cannot be used."""
    data = read_line(text)
    verify(data, text)
    return upgrade(data)


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


def _from_1(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 keyed no prompt or new-token length: its train and eval lines did no
    generation (0, the key's default); its generation lines are not comparable with anything
    (their lengths unknown, their samples_per_s batch / the median token gap)."""
    key = section(data, "key")
    if key.get("mode") == "generate":
        raise BadLine("a version-1 generation line: its key lacks the prompt and new-token "
                      "lengths and its rate is not decode tokens/s; not comparable", OLD_GENERATION)
    figures = dict(section(data, "figures"))
    if "samples_per_s_ci" in figures:
        figures["rate_ci"] = figures.pop("samples_per_s_ci")
    return {**data, "key": {**key, "prompt_len": 0, "new_tokens": 0}, "figures": figures,
            "rate_unit": "samples/s"}


#: _UPGRADES[v] turns a version-v line into a version-(v+1) one.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _from_1}
assert sorted(_UPGRADES) == list(range(1, BUNDLE_VERSION)), "every older version needs its step"
