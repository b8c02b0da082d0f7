"""What a run record keeps of its options (``RunRecord.options``), one class per kind, written
and read by the one codec (``accelbench.codec``) as the flat object result files have always
held: the run options' keys (``RunOptions``, inline), then the kind's own (a check's
``reference`` and ``check_steps``, a sweep's ``sweep``, a scale run's ``scale``, ``bench()``'s
``bench_isolation``); a probe run's own four keys.

Read leniently (``from_stored``): a key no field holds is skipped and counted, a missing one
takes its default, and the options' own checks are not run: a record says what ran, and a value
this accelbench no longer accepts (another machine's data folder, a precision since renamed)
must not make the file unreadable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from accelbench.codec import decode, encode
from accelbench.options import RunOptions
from accelbench.options.check import DEFAULT_CHECK_STEPS
from accelbench.options.scale import ScaleOptions

_INLINE: dict[str, Any] = {"inline": True}
_OPTIONAL: dict[str, Any] = {"omit_none": True}


@dataclass(frozen=True)
class Recorded:
    """A record's options: the base of every kind's, and what a record that kept none holds
    (written as ``{}``)."""

    def run_options(self) -> RunOptions | None:
        """The options its cases ran with; None for a probe run, or a record that kept none."""
        return None

    def to_dict(self) -> dict[str, Any]:
        encoded = encode(self)
        assert isinstance(encoded, dict)
        return encoded


@dataclass(frozen=True)
class RecordedRun(Recorded):
    """``run`` (and ``bench()``): the run options."""

    run: RunOptions = field(default_factory=RunOptions, metadata=_INLINE)
    #: ``bench()``: "process", or "inline: " and why the model could not go to a worker.
    bench_isolation: str | None = field(default=None, metadata=_OPTIONAL)

    def run_options(self) -> RunOptions:
        return self.run


@dataclass(frozen=True)
class RecordedCheck(RecordedRun):
    """``check``: the candidate's run options, the reference and the training steps a side."""

    reference: str = "cpu-fp64"
    check_steps: int = DEFAULT_CHECK_STEPS


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep swept: batch sizes (with the share of the best rate that counts as
    saturated), or prompt lengths (``axis`` "prompt_len")."""

    batch_sizes: tuple[int, ...] | None = field(default=None, metadata=_OPTIONAL)
    saturation_fraction: float | None = field(default=None, metadata=_OPTIONAL)
    axis: str | None = field(default=None, metadata=_OPTIONAL)
    prompt_lens: tuple[int, ...] | None = field(default=None, metadata=_OPTIONAL)


@dataclass(frozen=True)
class RecordedSweep(RecordedRun):
    """``sweep``: the run options and the sweep's plan (None in a sweep stopped before its end)."""

    #: ``bench()`` marks its record after the sweep has written its plan.
    JSON_ORDER: ClassVar[tuple[str, ...]] = ("run", "sweep")
    sweep: SweepPlan | None = field(default=None, metadata=_OPTIONAL)


@dataclass(frozen=True)
class RecordedScale(RecordedRun):
    """``scale``: the options every rank ran with (on the device the kind chose) and scale's own."""

    scale: ScaleOptions | None = field(default=None, metadata=_OPTIONAL)


@dataclass(frozen=True)
class RecordedProbe(Recorded):
    """``probe``: the devices asked for, the features probed, and how."""

    device: str = "all"
    features: tuple[str, ...] = ()
    skip_compile: bool = False
    #: None in records from before it was kept.
    isolation: str | None = field(default=None, metadata=_OPTIONAL)


#: Each record kind's options.
BY_KIND: dict[str, type[Recorded]] = {"run": RecordedRun, "check": RecordedCheck,
                                      "sweep": RecordedSweep, "scale": RecordedScale,
                                      "probe": RecordedProbe}


def _scale_from_flat(scale: dict[str, Any]) -> dict[str, Any]:
    """A scale section from before ``ScaleOptions`` held its ``run`` (version 1's: the workload,
    device, stop rule ... beside the process counts) in today's shape."""
    own = ("nproc", "fsdp", "backend", "rendezvous")
    run = {key: value for key, value in scale.items() if key not in (*own, "workload", "timeout")}
    if "workload" in scale:
        run["workloads"] = [scale["workload"]]
    if "timeout" in scale:
        run["case_timeout"] = scale["timeout"]
    return {"run": run, **{key: scale[key] for key in own if key in scale}}


def from_stored(kind: str, stored: Any, skipped: list[str] | None = None) -> Recorded:
    """The options a record of ``kind`` stored as ``stored``, read leniently (the paths of keys
    no field holds go to ``skipped``); an empty object (or a kind this accelbench does not know)
    is ``Recorded()``."""
    cls = BY_KIND.get(kind, Recorded) if stored else Recorded
    if isinstance(stored, dict) and isinstance(stored.get("scale"), dict) and "run" not in stored["scale"]:
        stored = {**stored, "scale": _scale_from_flat(stored["scale"])}
    recorded: Recorded = decode(cls, stored, strict=False, where="options", skipped=skipped,
                                checked=False)
    return recorded
