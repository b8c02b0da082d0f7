"""The privacy rule's second line of defence: no string that names a person or a host leaves.

The first line is ``build.py``: a bundle is built from an explicit list of fields (device model,
versions, settings, figures), never by copying a dict of the record, so host names, user names,
paths, the command line, environment variables, tracebacks and stderr tails are never read into
it. This module then checks every string of a built line against what would identify the
sharer on this machine (the record's host name, the user's name and home, the paths of the command
line and the options, environment variable values that look like paths or names) and against
address patterns (IPv4, IPv6, e-mail, absolute paths). A string that holds one is replaced by
``redacted-<8 hex digits>``: a hash of the original string with a random salt drawn once per bundle
(and never written), so two different names never become one. Readers never match a redacted
name (``is_redacted``): a redacted workload or device model is no one's peer and gets no site page,
since nothing says what it was. ``share --dry-run`` shows exactly what is left.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accelbench.results import RunRecord

REDACTED = "redacted"
#: Hex digits of the salted hash after "redacted-": distinct names stay distinct (a 1 in 4
#: billion collision within one bundle), and the original cannot be guessed back (the salt is
#: random and never written).
_REDACTED_DIGITS = 8
#: Shorter tokens would match inside ordinary words ("vm", "me").
MIN_TOKEN = 3
_PATTERNS = re.compile(
    r"\b\d{1,3}(?:\.\d{1,3}){3}\b"                       # IPv4
    r"|\b(?:[0-9a-fA-F]{1,4}:){2,7}[0-9a-fA-F]{0,4}\b"   # IPv6 (two or more colon groups)
    r"|[\w.+-]+@[\w-]+\.[\w.-]+"                         # e-mail
    r"|(?:^|[\s=:'\"(])(?:/|~/|[A-Za-z]:\\)[^\s]*[/\\]"  # an absolute path with a folder in it
)
#: Command-line arguments that name files even without a folder ("my_model.py").
_FILE_SUFFIXES = (".py", ".json", ".jsonl", ".html", ".sqlite", ".csv", ".md", ".txt")
#: Environment variables whose values name the person or the host.
_NAMING_VARIABLES = ("USER", "USERNAME", "LOGNAME", "HOME", "HOSTNAME", "COMPUTERNAME", "USERPROFILE")


def _path_parts(value: Any) -> Iterable[str]:
    """A path and its parts that are specific (not "/", "usr", "home" ...)."""
    if not isinstance(value, str) or not value:
        return []
    parts = [value]
    if "/" in value or "\\" in value:
        parts += [part for part in re.split(r"[/\\]", value)
                  if part not in ("", ".", "..", "home", "Users", "usr", "tmp", "var", "root")]
    return parts


def identifying_tokens(record: RunRecord) -> set[str]:
    """Strings that would point at the sharer: host, user, home, every path the run was given."""
    tokens: set[str] = set()
    machine = record.environment.get("machine")
    hostname = str(machine.get("hostname", "")) if isinstance(machine, dict) else ""
    tokens |= {hostname, hostname.split(".")[0]}
    with contextlib.suppress(KeyError, OSError):  # no user name in the password database (containers)
        tokens.add(getpass.getuser())
    tokens |= set(_path_parts(str(Path.home())))
    for name in _NAMING_VARIABLES:
        tokens |= set(_path_parts(os.environ.get(name, "")))
    for value in os.environ.values():
        if "/" in value and len(value) >= 8:
            tokens.add(value)
    for argument in record.command:
        if isinstance(argument, str) and ("/" in argument or "\\" in argument
                                          or argument.lower().endswith(_FILE_SUFFIXES)):
            tokens |= set(_path_parts(argument.split("=", 1)[-1]))
    run = record.options.run_options()
    if run is not None:
        for item in (str(run.data_dir) if run.data_dir else "", *run.workload_files):
            tokens |= set(_path_parts(item))
    python = record.environment.get("python")
    if isinstance(python, dict):
        tokens |= set(_path_parts(python.get("executable")))
    return {token for token in tokens if isinstance(token, str) and len(token) >= MIN_TOKEN}


def leaks(text: str, tokens: set[str]) -> bool:
    folded = text.casefold()
    return bool(_PATTERNS.search(text)) or any(token.casefold() in folded for token in tokens)


def new_salt() -> bytes:
    """One bundle's salt for its redacted names."""
    return secrets.token_bytes(16)


def redacted(original: str, salt: bytes) -> str:
    digest = hashlib.sha256(salt + original.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{REDACTED}-{digest[:_REDACTED_DIGITS]}"


def is_redacted(name: str) -> bool:
    """A name ``scrub`` replaced (or version 1's plain "redacted"): it never matches another."""
    return name == REDACTED or name.startswith(REDACTED + "-")


def scrub(value: Any, tokens: set[str], salt: bytes) -> Any:
    """``value`` with every string that leaks replaced by its salted redacted name (keys are this
    code's own)."""
    if isinstance(value, str):
        return redacted(value, salt) if leaks(value, tokens) else value
    if isinstance(value, dict):
        return {key: scrub(item, tokens, salt) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item, tokens, salt) for item in value]
    return value
