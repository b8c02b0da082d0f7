"""The torchrun launcher: each case's ranks under torchrun, one result made of their reports.

For a case, the launcher writes the work's spec with a :class:`~accelbench.engine.spec.RankPlan`
(backend, wrapper, process-group timeout, the folder for reports) and starts ``python -m
torch.distributed.run --nproc-per-node N`` (``--standalone`` on one node; torchrun's own
rendezvous options, passed on unchanged, across nodes) running ``python -m
accelbench.engine.launchers.worker --rank SPEC`` in every rank (``rank.py``). torchrun ends the
whole group when one rank dies; a group still running at the timeout is killed (torchrun and
every process under it) by the one supervisor (``engine/supervise.py``). Rank 0's progress lines
come back through torchrun's output; the rest of that output (every rank's) is kept as a tail.
The ranks' typed reports are then merged by one rule (``ranks.py``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import accelbench
from accelbench.engine.launchers.backends import LAUNCH_ENV, backend_for
from accelbench.engine.launchers.base import Progress, Work, progress_line
from accelbench.engine.launchers.process import WORKER_MODULE
from accelbench.engine.launchers.ranks import Ending, collect_ranks, merge_ranks
from accelbench.engine.spec import RankPlan
from accelbench.engine.supervise import ChildOutcome, supervise
from accelbench.results import CaseResult, ScaleFigures

if TYPE_CHECKING:
    from accelbench.devices import Device

#: Collectives in a rank give up this long after the launcher's timeout: the launcher's kill
#: comes first; the process-group timeout only backstops ranks it cannot reach (other nodes).
PG_TIMEOUT_MARGIN_S = 30.0
#: torchrun's output (every rank's, merged): the last lines kept.
TORCHRUN_TAIL_LINES = 200


def threads_per_process(nproc: int, threads: int | None = None) -> int:
    """torch threads in each of ``nproc`` processes on a node: ``threads``, or the CPU's cores
    shared out. torchrun would set OMP_NUM_THREADS=1 for N > 1 but leave 1 process all cores,
    which makes the comparison between world sizes unfair on the CPU."""
    return threads or max(1, (os.cpu_count() or 1) // nproc)


@dataclass(frozen=True)
class World:
    """The ranks a case runs as: ``nproc`` processes on each of ``nnodes`` nodes, meeting as
    ``torchrun_args`` say, over ``backend``, training under ``strategy`` (ddp or fsdp)."""

    nproc: int
    backend: str
    strategy: str = "ddp"
    nnodes: int = 1
    #: torchrun's rendezvous options (Rendezvous.torchrun_args()).
    torchrun_args: tuple[str, ...] = ("--standalone",)
    #: torch threads per process; None shares the node's cores out.
    threads: int | None = None

    @property
    def size(self) -> int:
        return self.nproc * self.nnodes

    @property
    def threads_per_process(self) -> int:
        return threads_per_process(self.nproc, self.threads)

    def figures(self) -> ScaleFigures:
        """The world's part of a case's result, before its ranks are in."""
        return ScaleFigures(world_size=self.size, nproc_per_node=self.nproc, nnodes=self.nnodes,
                            backend=self.backend, strategy=self.strategy)

    @classmethod
    def on_one_node(cls, nproc: int, device: Device, threads: int | None = None) -> World:
        """``nproc`` ranks on this node over ``device``'s backend, training under DDP: the world
        of a case of ``run`` or ``check`` under ``--isolation torchrun --nproc N``."""
        return cls(nproc, backend_for(device), threads=threads)


@runtime_checkable
class WorldWork(Work, Protocol):
    """A work whose items run as worlds of ranks."""

    def world(self, item: Any) -> World:
        """The world ``item`` runs as."""


def torchrun_command(nproc: int, torchrun_args: list[str] | tuple[str, ...],
                     spec_path: Path) -> list[str]:
    """torchrun starting ``nproc`` ranks per node, each ``python -m ...launchers.worker --rank
    SPEC``, which runs the spec's work as a rank (``torchrun_args``: the rendezvous)."""
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            *torchrun_args, "--max-restarts", "0", "-m", WORKER_MODULE, "--rank", str(spec_path)]


def rank_environment(threads: int) -> dict[str, str]:
    """Every rank's environment: this process's, its threads, and this accelbench first on the
    path (the ranks import the same accelbench as this process, installed or not)."""
    source_root = str(Path(accelbench.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (source_root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **LAUNCH_ENV, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": path,
            "PYTHONUNBUFFERED": "1"}


def in_torchrun(command: list[str], env: dict[str, str], timeout: float, echo: bool,
                progress: Progress | None = None) -> ChildOutcome:
    """torchrun under the shared supervisor: rank 0's progress lines passed on, the rest of its
    output (every rank's) merged into one tail; at the timeout torchrun and every rank under it
    are killed."""
    return supervise(command, timeout, env=env, merge_output=True, echo=echo,
                     tail_lines=TORCHRUN_TAIL_LINES,
                     on_line=lambda line: progress_line(line, progress))


@dataclass(frozen=True)
class TorchrunLauncher:
    """Each item as the world of ranks its work says (``scale``: one world per process count;
    ``run`` and ``check``: ``--nproc`` ranks over the case's device)."""

    #: Seconds a case's ranks (start-up, warm-up, measurement) may take before all are killed.
    timeout: float
    #: Stream torchrun's output to stderr as it comes (--debug).
    echo: bool = False
    #: The option that set ``timeout``, named when a case overruns it.
    timeout_flag: str = "--case-timeout"
    name = "torchrun"

    def launch(self, work: Work, item: Any, progress: Progress | None) -> CaseResult:
        if not isinstance(work, WorldWork):
            raise TypeError(f"{type(work).__name__} names no world to run under torchrun")
        world, skeleton, spec = work.world(item), work.skeleton(item), work.spec(item)
        threads = world.threads_per_process
        with tempfile.TemporaryDirectory(prefix="accelbench-ranks-") as folder:
            out = Path(folder)
            plan = RankPlan(world.backend, world.strategy, self.timeout + PG_TIMEOUT_MARGIN_S,
                            str(out))
            # Every rank runs with the node's share of the cores, whatever its parent had.
            options = replace(spec.options, threads=threads) if spec.options is not None else None
            (out / "spec.json").write_text(replace(spec, options=options, rank=plan).to_json())
            command = torchrun_command(world.nproc, world.torchrun_args, out / "spec.json")
            outcome = in_torchrun(command, rank_environment(threads), self.timeout, self.echo,
                                  progress)
            reports = collect_ranks(out, world.size if world.nnodes == 1 else None, outcome)
        overran = (f"world size {world.size} did not finish within {self.timeout_flag} "
                   f"{self.timeout:g} s")
        return merge_ranks(skeleton, reports, Ending(outcome, overran), world.figures())
