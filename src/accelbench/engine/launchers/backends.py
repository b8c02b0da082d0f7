"""The torchrun launcher's environment: which torch.distributed backend a device uses, whether it
works here, and which device a rank takes.

The device kind's backend comes from its adapter (``distributed_backend``: gloo for the CPU, nccl
for CUDA, xccl for XPU); an adapter that names none (a generic torch.accelerator device) gets the
one torch registers for that device type in ``Backend.default_device_backend_map``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from accelbench.devices import Device, DeviceSet
from accelbench.errors import UsageError

if TYPE_CHECKING:
    from accelbench.options import RunOptions

#: Set for every rank: NCCL then aborts a collective that timed out instead of hanging in it
#: (other backends ignore the variable).
LAUNCH_ENV = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}


def backend_for(device: Device) -> str:
    if device.adapter.distributed_backend:
        return device.adapter.distributed_backend
    import torch.distributed as dist

    if not dist.is_available():
        return ""
    return str(dist.Backend.default_device_backend_map.get(device.kind, ""))


def backend_unavailable_reason(device: Device, backend: str) -> str | None:
    """None when ``backend`` can carry ``device``'s tensors in this torch build, else why not."""
    import torch.distributed as dist

    if not dist.is_available():
        return "this torch build has no torch.distributed"
    if not backend:
        return f"torch.distributed has no backend for {device.kind} devices"
    if not dist.is_backend_available(backend):
        return f"the {backend} backend is not built into this torch"
    handles = getattr(dist.Backend, "backend_capability", {}).get(backend)
    if handles and device.kind not in handles:
        return f"the {backend} backend does not handle {device.kind} tensors (only {', '.join(handles)})"
    return None


def fsdp_unavailable_reason() -> str | None:
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401  (FSDP2, torch >= 2.6)
    except ImportError:
        return "FSDP2 (torch.distributed.fsdp.fully_shard) is not in this torch build"
    return None


def rank_device_spec(device: Device, local_rank: int) -> str:
    """The --device text a rank selects: processes share the CPU; an accelerator is per rank."""
    return device.kind if device.is_cpu else f"{device.kind}:{local_rank}"


def rank_device(devices: DeviceSet, device: Device, local_rank: int) -> Device:
    """This rank's device of ``device``'s kind, made the process's current device before anything
    touches it, so collectives and stray allocations of rank N do not land on device 0."""
    mine = devices.select(rank_device_spec(device, local_rank))[0]
    mine.make_current()
    return mine


def check_processes_fit(devices: DeviceSet, device: Device, nproc: int) -> None:
    """One process per accelerator on a node (NCCL and XCCL refuse two ranks on one device)."""
    count = devices.availability[device.kind].count
    if not device.is_cpu and nproc > count:
        raise UsageError(f"--nproc {nproc} needs {nproc} {device.kind} devices on this node; it "
                         f"has {count}")


def check_world(devices: DeviceSet, device: Device, nproc: int, backend: str = "") -> str:
    """The backend ``nproc`` ranks of ``device``'s kind meet over (``backend``, or the device's);
    a UsageError, before anything runs, where they cannot run here."""
    backend = backend or backend_for(device)
    reason = backend_unavailable_reason(device, backend)
    if reason:
        raise UsageError(f"cannot run {device.kind} processes over torch.distributed: {reason}")
    check_processes_fit(devices, device, nproc)
    return backend


def check_worlds(options: RunOptions, devices: DeviceSet, on: Iterable[Device]) -> None:
    """Under ``--isolation torchrun`` (``run``, ``check``): ``check_world`` for each device kind
    the plan's cases run on."""
    if options.isolation != "torchrun":
        return
    for device in {device.kind: device for device in on}.values():
        check_world(devices, device, options.nproc)
