"""The case's identity, declared once: :class:`CaseKey`, the fields that say which work a case did.

A planned case (``engine/case.Case``) and its result (``records.CaseResult``) inherit these fields,
and everything keyed by them is derived from ``fields(CaseKey)``: the comparability key and its
stored string (``results/key.py``), the result the runner starts from (``engine/case.py``), the
sweep's grouping (``sweeps/run.py``), the history's key columns (``store/history_layout.py``), the
shards' key columns (``sharing/shards.py``) and the bundle's ``key`` section (``sharing/build.py``).
A new key field is one line here (with ``ADDED`` where results from before it must keep their
stored key string); nothing else lists them. This module imports nothing of accelbench, so that
a test can replace the class before anything derives from it.

The fields are keyword-only (``Case(workload=..., mode=..., device=..., batch_size=...)``), so
that fields with and without defaults can keep the order of the key.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

#: The metadata of a key field added after results were stored: left out of the stored key string
#: at its default, so that a result stored before the field existed keeps its key.
ADDED = {"omitted_at_default": True}


@dataclass(kw_only=True)
class CaseKey:
    """What must be equal for two cases to have done the same work (not the device).

    Not frozen: a result (a CaseResult) is filled in as it runs, and a dataclass cannot be both a
    frozen class's base and a mutable one's; a Case is hashed and compared by its fields."""

    workload: str
    #: The workload's ``version``: bumped when its work changes.
    workload_version: int = 1
    mode: str
    batch_size: int
    precision: str = "fp32"
    #: ``--compile BACKEND[:MODE]`` as written (devices/compilation.py); "" not compiled.
    compile_backend: str = ""
    channels_last: bool = False
    #: The data kind and where the batches live ("synthetic": host batches copied each step,
    #: "synthetic-device": resident on the device, "real"), so it keys the data mode too.
    data: str = "synthetic"
    size: str = "published"
    #: Generation cases (mode "generate"): prompt and new tokens per sequence; 0 otherwise.
    prompt_len: int = field(default=0, metadata=ADDED)
    new_tokens: int = field(default=0, metadata=ADDED)
    #: Generation with --stream: each token read to the host as it was made, so its timing is a
    #: streaming loop's, not the device's cadence: other work.
    streamed: bool = field(default=False, metadata=ADDED)
    #: Generation cases run under --protocol (llama-bench, gpt-fast, mlperf-client): shaped,
    #: repeated and reported as that peer defines them; "" otherwise.
    protocol: str = field(default="", metadata=ADDED)


_ZERO: dict[str, Any] = {"str": "", "int": 0, "bool": False}


def key_fields() -> tuple[str, ...]:
    """The key's fields, in order."""
    return tuple(spec.name for spec in fields(CaseKey))


def key_defaults() -> dict[str, Any]:
    """Field -> the value a result without the field measured: its default, or for a field every
    case names (workload, mode, batch size) the empty value of its type."""
    return {spec.name: _ZERO[str(spec.type)] if spec.default is MISSING else spec.default
            for spec in fields(CaseKey)}


def omitted_at_default() -> tuple[str, ...]:
    """The fields added later (``ADDED``): left out of the stored key string at their default."""
    return tuple(spec.name for spec in fields(CaseKey) if spec.metadata.get("omitted_at_default"))


def key_values(case: Any) -> dict[str, Any]:
    """``case``'s key fields by name (a Case or a CaseResult): what a result copies of its case."""
    return {spec.name: getattr(case, spec.name) for spec in fields(CaseKey)}
