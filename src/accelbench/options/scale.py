"""``scale``'s options: the run options every rank runs with (``RunOptions``: one workload,
training, on a device kind) wrapped with what is scale's own (the process counts, the wrapper, the
backend, the rendezvous across machines), validated when built (torch-free, like every option
here)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from accelbench.codec import Codec
from accelbench.errors import UsageError
from accelbench.options import RunOptions

if TYPE_CHECKING:
    from accelbench.devices import Device

#: Seconds one world size (start-up, warm-up and measurement) may take before it is killed.
DEFAULT_TIMEOUT_S = 600.0


def check_device_kind(spec: str) -> None:
    """``--device`` names a kind, never one device: local rank N of each node takes device N of
    that kind, so an index would be silently ignored (``cuda:3`` running on cuda:0..N-1). Which
    devices the ranks use is chosen by what the process can see (CUDA_VISIBLE_DEVICES=3,4 makes
    GPUs 3 and 4 the ranks' cuda:0 and cuda:1): refused here rather than half-honoured, since
    one index cannot say where ranks 2, 3 ... go."""
    if ":" in spec:
        raise UsageError(f"--device {spec!r}: scale takes a device kind without an index (allowed: "
                         "cpu, cuda, xpu, auto), since local rank N of each node uses device N; to "
                         "run on other devices, make only those visible to the process (for cuda: "
                         "CUDA_VISIBLE_DEVICES=3,4 gives the ranks GPUs 3 and 4)")


@dataclass(frozen=True)
class Rendezvous(Codec):
    """torchrun's multi-node options; one node without an endpoint runs ``--standalone``."""

    nnodes: int = 1
    node_rank: int | None = None
    endpoint: str = ""
    backend: str = "c10d"
    id: str = "accelbench"

    def __post_init__(self) -> None:
        if self.nnodes < 1:
            raise UsageError(f"--nnodes must be positive, got {self.nnodes}")
        if self.nnodes > 1 and not self.endpoint:
            raise UsageError(f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT (where the "
                             "nodes meet)")

    def torchrun_args(self) -> list[str]:
        if self.nnodes == 1 and not self.endpoint:
            return ["--standalone"]
        node_rank = ["--node-rank", str(self.node_rank)] if self.node_rank is not None else []
        return ["--nnodes", str(self.nnodes), *node_rank, "--rdzv-endpoint", self.endpoint,
                "--rdzv-backend", self.backend, "--rdzv-id", self.id]


@dataclass(frozen=True)
class ScaleOptions(Codec):
    """What ``scale`` runs: ``run``, the settings of every rank (``run``'s own options: the
    workload, device kind, stop rule, warm-up, batch per process, threads per process, size,
    seed, workload files, cuDNN's benchmark mode; ``case_timeout`` is ``--timeout``, the seconds
    one world size may take), at each process count of ``nproc``."""

    run: RunOptions
    nproc: tuple[int, ...] = (1, 2)
    fsdp: bool = False
    #: "" takes the device's backend.
    backend: str = ""
    rendezvous: Rendezvous = field(default_factory=Rendezvous)
    #: Stream torchrun's output to stderr as it comes (--debug): how it is shown, not what ran,
    #: so not stored.
    echo: bool = field(default=False, metadata={"stored": False})

    def __post_init__(self) -> None:
        check_device_kind(self.run.device)
        if len(self.run.workloads) != 1:
            raise UsageError(f"scale takes one workload, got {len(self.run.workloads)}: "
                             f"{', '.join(self.run.workloads)}")
        if self.run.modes != ("train",):
            raise UsageError(f"scale measures training (mode train), not {', '.join(self.run.modes)}")
        if not self.nproc or any(n <= 0 for n in self.nproc):
            raise UsageError(f"--nproc needs positive process counts, got {list(self.nproc)}")
        if self.run.isolation == "none" and (set(self.nproc) != {1} or self.rendezvous.nnodes != 1):
            raise UsageError(f"scale inline (isolation none) runs a world of one process in this "
                             f"one: --nproc 1 on one node, not --nproc {','.join(map(str, self.nproc))}"
                             f" on {self.rendezvous.nnodes} node(s)")

    @classmethod
    def of(cls, workload: str, nproc: tuple[int, ...] = (1, 2), *, device: str = "cpu",
           timeout: float = DEFAULT_TIMEOUT_S, fsdp: bool = False, backend: str = "",
           rendezvous: Rendezvous | None = None, echo: bool = False,
           **run: Any) -> ScaleOptions:
        """Options for scaling ``workload``'s training; ``run`` takes ``RunOptions``' other
        fields (stop, warmup_steps, batch_size, threads, size, seed ...)."""
        return cls(RunOptions(workloads=(workload,), device=device, modes=("train",),
                              case_timeout=timeout, **run),
                   nproc, fsdp, backend, rendezvous or Rendezvous(), echo)

    @property
    def workload(self) -> str:
        return self.run.workloads[0]

    @property
    def timeout(self) -> float:
        """Seconds one world size may take (``--timeout``)."""
        return self.run.case_timeout

    @property
    def strategy(self) -> str:
        return "fsdp" if self.fsdp else "ddp"

    def run_options(self, device: Device) -> RunOptions:
        """The options every rank runs with (and the record keeps), on ``device``'s kind."""
        return replace(self.run, device=device.name)
