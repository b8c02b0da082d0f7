"""What crosses the process boundary: the :class:`CaseSpec` a worker process or a torchrun rank
is started with, typed on both sides and written to JSON and read back here only.

A spec names the work (the subcommand's own function, ``module:function``), and carries the run
options, the case (a real :class:`~accelbench.engine.case.Case`; its device travels by name and is
found again in the worker), the work's own settings dataclass (check's reference and steps,
probe's device and features), the files a worker loads before anything else (a ``bench()``
model's pickle file), and, under torchrun, how a rank joins its world (:class:`RankPlan`). The
whole spec goes through the one codec (``accelbench.codec``, strict: a key that is no field is an
error naming its path), derived from the dataclass fields, so a field added to any part reaches the
worker without anyone listing it; the case's device (by name) and the settings (with their class)
say how they travel in their fields' ``codec``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from accelbench.codec import Codec, FieldCodec, decode, encode
from accelbench.engine.case import Case
from accelbench.options import RunOptions

if TYPE_CHECKING:
    from accelbench.devices import DeviceSet
    from accelbench.measure.data_parallel import RankHooks
    from accelbench.results import ScaleFigures

Settings = TypeVar("Settings")

#: The strategies a torchrun rank wraps a training model in.
STRATEGIES = ("ddp", "fsdp")


@dataclass(frozen=True)
class RankPlan(Codec):
    """How each torchrun rank joins its world: the torch.distributed backend, the wrapper its
    training model gets (DistributedDataParallel, or FSDP2's ``fully_shard``), how long a
    collective may wait, and the folder every rank writes its report to; and, filled in by the
    rank as it starts (engine/launchers/rank.py), its place in that world. The work passes it on
    to ``measure_case``, which measures as :meth:`hooks` say."""

    backend: str
    strategy: str = "ddp"
    pg_timeout_s: float = 1800.0
    out_dir: str = ""
    rank: int = 0
    world_size: int = 1

    def hooks(self) -> RankHooks:
        """How this rank measures its case (measure/data_parallel.py)."""
        from accelbench.measure.data_parallel import RankHooks

        return RankHooks(self.rank, self.world_size, self.strategy)

    def figures(self, nosync_step_times: list[float]) -> ScaleFigures:
        """A rank's own part of its world's figures, carried in its result to the rank entry
        (which reports them; the launcher's merge replaces them with the world's)."""
        from accelbench.results import ScaleFigures, ScaleRank

        return ScaleFigures(world_size=self.world_size, backend=self.backend,
                            strategy=self.strategy,
                            ranks=[ScaleRank(rank=self.rank, nosync_step_times=nosync_step_times)])


def _dotted(kind: type) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"


def _settings_class(name: str) -> type:
    """The settings dataclass ``module:Class`` names, only inside accelbench (a spec is data:
    it never makes a worker import anything else)."""
    module, colon, qualname = name.partition(":")
    kind = getattr(importlib.import_module(module), qualname, None) \
        if colon and module.startswith("accelbench.") else None
    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
        raise ValueError(f"a spec's settings are an accelbench dataclass 'accelbench.MODULE:Class', "
                         f"not {name!r}")
    return kind


def _encode_settings(settings: Any) -> dict[str, Any]:
    return {"type": _dotted(type(settings)), "fields": encode(settings)}


def _decode_settings(data: Any, context: Mapping[str, Any]) -> Any:
    return decode(_settings_class(data["type"]), data["fields"])


#: A work's settings travel with their class, so the worker gets the dataclass back.
SETTINGS_WITH_TYPE = FieldCodec(_encode_settings, _decode_settings)


@dataclass(frozen=True)
class CaseSpec:
    """What a worker process (or each torchrun rank) runs: ``work``, called with this spec and a
    :class:`~accelbench.engine.launchers.base.Report`."""

    work: str
    options: RunOptions | None = None
    case: Case | None = None
    #: The work's own settings: an instance of a dataclass of its module.
    settings: Any = field(default=None, metadata={"codec": SETTINGS_WITH_TYPE})
    #: Files the worker loads before the case (a ``bench()`` model's pickle file: the model
    #: rides in the spec, not beside it).
    model_files: tuple[str, ...] = ()
    #: Under torchrun: how each rank joins its world; None elsewhere.
    rank: RankPlan | None = None

    def run_options(self) -> RunOptions:
        if self.options is None:
            raise ValueError(f"the spec of {self.work} carries no run options")
        return self.options

    def the_case(self) -> Case:
        if self.case is None:
            raise ValueError(f"the spec of {self.work} carries no case")
        return self.case

    def settings_as(self, kind: type[Settings]) -> Settings:
        """The work's settings, which must be a ``kind``."""
        if not isinstance(self.settings, kind):
            raise ValueError(f"the spec of {self.work} carries {type(self.settings).__name__} "
                             f"settings, not {kind.__name__}")
        return self.settings

    def to_json(self) -> str:
        return json.dumps(encode(self))

    @classmethod
    def from_json(cls, text: str, devices: DeviceSet | None = None) -> CaseSpec:
        """The spec ``to_json`` wrote; its case's device is found in ``devices`` (by default the
        devices this process sees)."""
        spec: CaseSpec = decode(cls, json.loads(text), context={"devices": devices})
        return spec


def model_files_for(workload: str) -> tuple[str, ...]:
    """The files a worker needs to resolve ``workload``: a ``bench()`` model's pickle file
    (``bench:NAME``, shared by the bench call running now); nothing for any other name."""
    from accelbench.workloads.named.objects import shared_file

    path = shared_file(workload)
    return (path,) if path else ()


def load_model_files(paths: tuple[str, ...]) -> None:
    """In a worker: make the models of ``paths`` resolvable before the case is built."""
    if paths:
        from accelbench.workloads.named.objects import load_shared

        for path in paths:
            load_shared(path)
