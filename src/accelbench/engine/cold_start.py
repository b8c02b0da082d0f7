"""How each case begins: compiled cases compile cold, and every case records its start
(results/first_use.Start), so its first-use figures, compile time and break-even say what they are.

torch.compile keeps on-disk caches, on by default: inductor's FX graph and autotune caches,
AOTAutograd's, Triton's kernels, all under ``TORCHINDUCTOR_CACHE_DIR`` (default
``/tmp/torchinductor_USER``) and ``TRITON_CACHE_DIR``. A second run of the same model compiles
from them in a fraction of the time, so two identical runs could report compile times several-fold
apart. Here a compiled case compiles into an empty folder made for it and removed after it, with
dynamo's in-process caches reset and inductor's in-memory ones cleared (torch reads both
variables on every use, and since 2.6 passes them to its compile workers with each job); torch's
cache counters then say whether a lookup still hit (a remote cache a user switched on, a graph
compiled twice within the case), and the switches in force are recorded beside them.

A case that is not the first in its process (``--isolation none``, or a repeat inline) finds the
device initialised and its kernels loaded: it is counted here and its first-use figures are
marked warm.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field

from accelbench.results.first_use import FRESH_CACHE, Start

#: The folders torch.compile's caches go to, pointed at the case's own for the case.
CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
#: The cache switches recorded: (name in the record, module, attribute). A torch without one
#: records None for it (torch 2.6 to 2.14 moved and added some).
CACHE_SWITCHES = (
    ("fx_graph_cache", "torch._inductor.config", "fx_graph_cache"),
    ("fx_graph_remote_cache", "torch._inductor.config", "fx_graph_remote_cache"),
    ("autotune_local_cache", "torch._inductor.config", "autotune_local_cache"),
    ("autotune_remote_cache", "torch._inductor.config", "autotune_remote_cache"),
    ("bundled_autotune_remote_cache", "torch._inductor.config", "bundled_autotune_remote_cache"),
    ("autograd_cache", "torch._functorch.config", "enable_autograd_cache"),
    ("remote_autograd_cache", "torch._functorch.config", "enable_remote_autograd_cache"),
    ("force_disable_caches", "torch._inductor.config", "force_disable_caches"),
)
#: torch._dynamo.utils.counters groups whose "*_cache_hit/miss/bypass" entries are kept.
COUNTER_GROUPS = ("inductor", "aot_autograd")

_cases_started = 0


def cases_started() -> int:
    """Cases begun in this process so far."""
    return _cases_started


def _switches() -> dict[str, bool | None]:
    found: dict[str, bool | None] = {}
    for name, module, attribute in CACHE_SWITCHES:
        try:
            value = getattr(importlib.import_module(module), attribute, None)
        except ImportError:
            value = None
        found[name] = value if isinstance(value, bool) or value is None else bool(value)
    return found


def _cache_counts() -> dict[str, int]:
    utils = sys.modules.get("torch._dynamo.utils")  # not imported yet: nothing counted yet
    if utils is None:
        return {}
    return {name: int(count) for group in COUNTER_GROUPS
            for name, count in utils.counters[group].items() if "_cache_" in name}


def _clear_in_memory_caches() -> None:
    """Dynamo's code caches and inductor's in-memory ones (some keyed by the cache folder), where
    they were imported: importing them here would take their import out of the compile time a
    first compile pays."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()
    utils = sys.modules.get("torch._inductor.utils")
    clear = getattr(utils, "clear_caches", None)  # absent in some torch versions
    if clear is not None:
        clear()


@dataclass
class CaseStart:
    """Around one case: ``with CaseStart(compiled) as start: ...``, then ``start.record``."""

    compiled: bool
    record: Start | None = None
    _folder: str = ""
    _saved: dict[str, str | None] = field(default_factory=dict)
    _before: dict[str, int] = field(default_factory=dict)
    _cases_before: int = 0

    def __enter__(self) -> CaseStart:
        global _cases_started
        self._cases_before = _cases_started
        _cases_started += 1
        if self.compiled:
            self._folder = tempfile.mkdtemp(prefix="accelbench-compile-cache-")
            self._saved = {name: os.environ.get(name) for name in CACHE_VARIABLES}
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = self._folder
            os.environ["TRITON_CACHE_DIR"] = os.path.join(self._folder, "triton")
            _clear_in_memory_caches()
            self._before = _cache_counts()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.compiled:
            self.record = Start(self._cases_before)
            return
        try:
            after = _cache_counts()
            lookups = {name: count - self._before.get(name, 0) for name, count in after.items()
                       if count - self._before.get(name, 0)}
            self.record = Start(self._cases_before, FRESH_CACHE, _switches(), lookups)
        finally:
            for name, value in self._saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            with contextlib.suppress(Exception):  # a torch without these leaves nothing to clear
                _clear_in_memory_caches()
            shutil.rmtree(self._folder, ignore_errors=True)
