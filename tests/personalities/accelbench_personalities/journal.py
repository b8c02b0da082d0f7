"""What a personality saw, written where the tests can read it across processes.

``ACCELBENCH_PERSONALITY_LOG`` names a JSON-lines file that every process under the personality
appends to (one ``write`` per line, so processes do not interleave within a line):

- ``{"event": "install", ...}`` when a process installs the personality (its pid and argv);
- ``{"event": "rounded", "op": ..., "flags": ..., "where": ...}`` each time a product or a
  convolution was rounded to TF32 because the flags in force allowed it;
- ``{"event": "event_create", "where": ...}`` when a timing event is first recorded (torch creates
  the device's event then, not when the Python object is made);
- ``{"event": "event_record", "where": ...}`` each time a timing event was recorded on the device
  (on MPS each one is a command-buffer commit);
- ``{"event": "summary", "ops": {...}}`` at exit: how many device ops of each rounding kind ran
  exact and rounded in the process.

``where`` is the innermost frame in accelbench's own sources (``accelbench/measure/loop/step_loop.py:123
in _run_window``) plus the accelbench frames above it, so a test can tell the timed loop from
set-up code.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import re
import sys
import threading
from typing import Any

LOG_ENV = "ACCELBENCH_PERSONALITY_LOG"

_lock = threading.Lock()
#: (kind, op name) -> count, for the summary at exit.
counts: collections.Counter[tuple[str, str]] = collections.Counter()


def log_path() -> str | None:
    return os.environ.get(LOG_ENV) or None


def write(event: str, **fields: Any) -> None:
    path = log_path()
    if path is None:
        return
    line = json.dumps({"event": event, "pid": os.getpid(), **fields}, default=str) + "\n"
    with _lock:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def accelbench_frames(limit: int = 6) -> list[str]:
    """The calling frames in accelbench's own modules, innermost first:
    ``accelbench/measure/loop/step_loop.py:203 in _run_window``."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None and len(frames) < limit:
        module = str(frame.f_globals.get("__name__", ""))
        if module == "accelbench" or module.startswith("accelbench."):
            name = "__init__" if frame.f_code.co_filename.endswith("__init__.py") else ""
            path = module.replace(".", "/") + (f"/{name}" if name else "") + ".py"
            frames.append(f"{path}:{frame.f_lineno} in {frame.f_code.co_name}")
        frame = frame.f_back
    return frames


def count(kind: str, op: str) -> None:
    counts[(kind, op)] += 1


def _summary() -> None:
    if counts:
        ops: dict[str, dict[str, int]] = {}
        for (kind, op), n in sorted(counts.items()):
            ops.setdefault(kind, {})[op] = n
        write("summary", ops=ops)


atexit.register(_summary)


# --- reading it back (the tests) ----------------------------------------------------------------
class Journal:
    """The entries a personality wrote to ``path`` (all processes)."""

    def __init__(self, path: Any) -> None:
        self.path = path

    def entries(self, event: str | None = None) -> list[dict[str, Any]]:
        try:
            with open(self.path, encoding="utf-8") as lines:
                found = [json.loads(line) for line in lines if line.strip()]
        except FileNotFoundError:
            return []
        return [entry for entry in found if event is None or entry["event"] == event]

    def processes(self) -> set[int]:
        """The processes that installed the personality."""
        return {entry["pid"] for entry in self.entries("install")}

    def rounded(self) -> list[dict[str, Any]]:
        return self.entries("rounded")

    def fp32_rounded(self) -> list[dict[str, Any]]:
        """Ops rounded to TF32 while fp32 matmuls were not allowed TF32: work meant to be fp32
        (accelbench's fp32 sets the matmul precision "highest", its tf32 "high") that an Ampere
        GPU rounds anyway, because cuDNN's own switch was left at torch's default."""
        return [entry for entry in self.rounded() if entry["flags"]["cuda.matmul"] != "tf32"]

    def ops(self, kind: str) -> dict[str, int]:
        """Device ops of ``kind`` ("exact", "rounded", "sync", "commit") summed over the
        processes' exit summaries."""
        total: collections.Counter[str] = collections.Counter()
        for entry in self.entries("summary"):
            total.update(entry["ops"].get(kind, {}))
        return dict(total)

    def event_records(self, under: str = "") -> list[dict[str, Any]]:
        """Timing events recorded on the device by code with a frame matching the regular
        expression ``under`` (``accelbench/measure/loop/step_loop\\.py:\\d+ in _run_window$``)."""
        pattern = re.compile(under)
        return [entry for entry in self.entries("event_record")
                if any(pattern.search(frame) for frame in entry["where"])]

    def event_creations(self, under: str = "") -> list[dict[str, Any]]:
        """Device events created (at their first record, as torch creates them) by code with a
        frame matching ``under``: ``[]`` under a timed window's frames is "no event created
        inside it"."""
        pattern = re.compile(under)
        return [entry for entry in self.entries("event_create")
                if any(pattern.search(frame) for frame in entry["where"])]

    def describe(self, entries: list[dict[str, Any]], limit: int = 5) -> str:
        """A few entries in words, for an assertion's message."""
        return "; ".join(f"{e.get('op', e['event'])} at {' <- '.join(e.get('where', [])[:3])}"
                         for e in entries[:limit])
