"""``scale``'s options: the process counts, the rendezvous across machines and the settings every
rank runs with, validated when built (torch-free, like every option here)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accelbench.codec import Codec
from accelbench.errors import UsageError
from accelbench.measure.stop import StopRule
from accelbench.options import DEFAULT_WARMUP_STEPS, RunOptions

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
    workload: str
    nproc: tuple[int, ...]
    device: str = "cpu"
    stop: StopRule = field(default_factory=StopRule)
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    #: Per process; None takes the workload's training batch.
    batch_size: int | None = None
    size: str = "published"
    #: torch threads per process; None shares the CPU's cores out among the node's processes.
    threads: int | None = None
    fsdp: bool = False
    #: "" takes the device's backend.
    backend: str = ""
    rendezvous: Rendezvous = field(default_factory=Rendezvous)
    timeout: float = DEFAULT_TIMEOUT_S
    seed: int = 0
    workload_files: tuple[str, ...] = ()
    #: Stream torchrun's output to stderr as it comes (--debug): how it is shown, not what ran,
    #: so not stored.
    echo: bool = field(default=False, metadata={"stored": False})
    #: torch.backends.cudnn.benchmark in every rank (--no-cudnn-benchmark: off), as ``run`` has it.
    cudnn_benchmark: bool = True

    def __post_init__(self) -> None:
        check_device_kind(self.device)
        if not self.nproc or any(n <= 0 for n in self.nproc):
            raise UsageError(f"--nproc needs positive process counts, got {list(self.nproc)}")
        if not self.timeout > 0:
            raise UsageError(f"--timeout must be positive, got {self.timeout}")
        if self.warmup_steps < 0:
            raise UsageError(f"--warmup must be 0 or more, got {self.warmup_steps}")

    @property
    def strategy(self) -> str:
        return "fsdp" if self.fsdp else "ddp"

    def threads_per_process(self, nproc: int) -> int:
        # torchrun would set OMP_NUM_THREADS=1 for N > 1 but leave 1 process all cores, which
        # makes the comparison between world sizes unfair on the CPU.
        return self.threads or max(1, (os.cpu_count() or 1) // nproc)

    def run_options(self, device: Device) -> RunOptions:
        """The same settings as ``accelbench run`` options (for the record and each case)."""
        return RunOptions(workloads=(self.workload,), device=device.name, modes=("train",),
                          stop=self.stop, warmup_steps=self.warmup_steps,
                          batch_size=self.batch_size, threads=self.threads, size=self.size,
                          seed=self.seed, workload_files=self.workload_files,
                          case_timeout=self.timeout, cudnn_benchmark=self.cudnn_benchmark)
