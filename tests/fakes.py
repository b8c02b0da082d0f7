"""Fake hardware for the device paths this machine cannot run (CUDA, MPS, XPU)."""

from __future__ import annotations

import time
import warnings
from types import SimpleNamespace
from typing import Any

from torch.overrides import TorchFunctionMode

from accelbench.devices.base import Availability, DeviceAdapter
from accelbench.devices.mps import MacFacts


def fake_torch(cuda: str | None = None, hip: str | None = None, cuda_available: bool = False,
               cuda_count: int = 0, cuda_warning: str = "", mps_built: bool = False,
               mps_available: bool = False, xpu_compiled: bool = False,
               xpu_available: bool = False, xpu_count: int = 0,
               accelerator: str | None = None, accelerator_count: int = 0) -> Any:
    def cuda_is_available() -> bool:
        if cuda_warning:
            warnings.warn(cuda_warning, UserWarning, stacklevel=1)
        return cuda_available

    props = SimpleNamespace(name="Fake GPU 80GB", total_memory=80 * 2**30, major=9, minor=0,
                            multi_processor_count=132)
    return SimpleNamespace(
        version=SimpleNamespace(cuda=cuda, hip=hip),
        cuda=SimpleNamespace(is_available=cuda_is_available, device_count=lambda: cuda_count,
                             get_device_properties=lambda i: props,
                             mem_get_info=lambda i: (70 * 2**30, 80 * 2**30)),
        backends=SimpleNamespace(mps=SimpleNamespace(is_built=lambda: mps_built,
                                                     is_available=lambda: mps_available)),
        xpu=SimpleNamespace(_is_compiled=lambda: xpu_compiled, is_available=lambda: xpu_available,
                            device_count=lambda: xpu_count),
        accelerator=SimpleNamespace(
            current_accelerator=lambda: SimpleNamespace(type=accelerator) if accelerator else None,
            device_count=lambda: accelerator_count,
        ),
    )


class FakeAsyncAdapter(DeviceAdapter):
    """An 'accelerator' whose synchronisations are counted, for timing-loop tests."""

    kind = "fake"
    is_async = True

    def __init__(self) -> None:
        self.syncs = 0
        self.peak = 0

    def availability(self) -> Availability:
        return Availability("fake", True, count=2)

    def synchronize(self, index: int) -> None:
        self.syncs += 1

    def reset_peak_memory(self, index: int) -> None:
        self.peak = 0

    def peak_memory_bytes(self, index: int) -> int | None:
        return self.peak

    def info(self, index: int) -> dict[str, Any]:
        return {"name": f"Fake accelerator {index}", "memory_total_bytes": 2**30}

    def torch_device(self, index: int) -> str:
        return "cpu"


# --- CUDA: which calls create a context ---------------------------------------------------------
#: torch.cuda calls that create (or need) a CUDA context on the device they name. Describing a GPU
#: (is_available, device_count, get_device_properties) does not; mem_get_info does (cudaMemGetInfo
#: runs on the device), as does anything that allocates, synchronises or selects it.
CONTEXT_CALLS = ("mem_get_info", "set_device", "synchronize", "reset_peak_memory_stats",
                 "max_memory_allocated", "empty_cache")


class FakeCuda:
    """A torch.cuda with ``count`` GPUs that logs every call creating a context, per GPU."""

    def __init__(self, count: int = 2) -> None:
        self.count = count
        self.contexts: list[tuple[str, int]] = []
        self.current = 0

    def is_available(self) -> bool:
        return self.count > 0

    def device_count(self) -> int:
        return self.count

    def get_device_properties(self, index: int) -> Any:
        # torch's _CUDAuuid prints without NVML's "GPU-" prefix.
        return SimpleNamespace(name=f"Fake GPU {index}", total_memory=80 * 2**30, major=9, minor=0,
                               multi_processor_count=132, uuid=fake_gpu_uuid(index))

    def _context(self, call: str, index: int | None) -> None:
        self.contexts.append((call, self.current if index is None else int(index)))

    def mem_get_info(self, index: int | None = None) -> tuple[int, int]:
        self._context("mem_get_info", index)
        return 70 * 2**30, 80 * 2**30

    def set_device(self, index: int) -> None:
        self._context("set_device", index)
        self.current = index

    def synchronize(self, index: int | None = None) -> None:
        self._context("synchronize", index)

    def reset_peak_memory_stats(self, index: int | None = None) -> None:
        self._context("reset_peak_memory_stats", index)

    def max_memory_allocated(self, index: int | None = None) -> int:
        self._context("max_memory_allocated", index)
        return 0

    # torch.cuda's device selection as torch 2.14 implements it (torch/cuda/__init__.py).
    def current_device(self) -> int:
        return self.current

    def has_context(self, index: int) -> bool:
        return any(device == index for _, device in self.contexts)

    def _exchange_device(self, index: int) -> int:
        """Select ``index`` (creating its context), returning the device selected before."""
        previous = self.current
        if index >= 0 and index != previous:
            self.set_device(index)
        return previous

    def _maybe_exchange_device(self, index: int) -> int:
        """Select ``index`` again without creating a context on it: c10's MaybeExchangeDevice
        calls cudaSetDevice only for a device whose primary context exists, else records it."""
        previous = self.current
        if index >= 0 and index != previous:
            if self.has_context(index):
                self.set_device(index)
            else:
                self.current = index
        return previous

    def device(self, index: int) -> Any:
        """``torch.cuda.device(index)``: exchange on entry, maybe-exchange back on exit."""
        return _ExchangeGuard(self._exchange_device, self._maybe_exchange_device, index)


class _ExchangeGuard:
    """The shape of torch.cuda.device and torch.accelerator.device_index."""

    def __init__(self, exchange: Any, maybe_exchange: Any, index: int) -> None:
        self.exchange, self.maybe_exchange, self.index = exchange, maybe_exchange, index
        self.previous = -1

    def __enter__(self) -> None:
        self.previous = self.exchange(self.index)

    def __exit__(self, *exc_info: object) -> None:
        self.maybe_exchange(self.previous)


def with_accelerator_device_index(torch_module: Any) -> Any:
    """A :func:`fake_cuda_torch` whose ``torch.accelerator`` has torch >= 2.8's
    ``device_index`` context manager and ``current_device_index`` (over the same FakeCuda)."""
    cuda = torch_module.cuda
    torch_module.accelerator.current_device_index = cuda.current_device
    torch_module.accelerator.device_index = lambda index: _ExchangeGuard(
        cuda._exchange_device, cuda._maybe_exchange_device, index)
    return torch_module


def fake_gpu_uuid(index: int) -> str:
    return f"0000000{index}-aaaa-bbbb-cccc-dddddddddddd"


def fake_cuda_torch(count: int = 2) -> Any:
    """A torch module whose CUDA is :class:`FakeCuda` (``.cuda.contexts`` says who touched what)."""
    torch_module = fake_torch(cuda="12.6", cuda_available=True, cuda_count=count)
    torch_module.cuda = FakeCuda(count)
    torch_module.accelerator = SimpleNamespace(
        current_accelerator=lambda check_available=False: SimpleNamespace(type="cuda"),
        device_count=lambda: count,
        set_device_index=torch_module.cuda.set_device,
    )
    return torch_module


# --- NVML ---------------------------------------------------------------------------------------
class FakeNvmlError(Exception):
    pass


class FakeNvml:
    """pynvml for GPUs listed in NVML's (PCI bus) order by UUID. The energy counter, like a real
    one, advances only every ``update_s`` seconds of ``clock`` (steps of ``watts`` x ``update_s``).

    ``mig`` maps MIG slices, by NVML's name for them, to their GPU's UUID: ``MIG-<uuid>`` as
    drivers R470 and later name them, or ``MIG-GPU-<gpu uuid>/<gi>/<ci>`` as older ones did.
    ``nvmlDeviceGetHandleByUUID`` finds a slice by that name only (never as ``GPU-<uuid>``); its
    handle reads its own memory (a 1g.10gb slice) and refuses the board's sensors (temperature,
    clocks, power, energy), which belong to the parent GPU
    (``nvmlDeviceGetDeviceHandleFromMigDeviceHandle``). ``inits``/``shutdowns`` count NVML's
    session calls."""

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVMLError = FakeNvmlError

    def __init__(self, uuids: list[str], watts: float = 300.0, update_s: float = 0.1,
                 clock: Any = None, mig: dict[str, str] | None = None) -> None:
        self.uuids = uuids
        self.mig = dict(mig or {})
        self.watts, self.update_s = watts, update_s
        self.clock = clock or time.perf_counter
        self.handles_used: list[str] = []
        self.inits = self.shutdowns = 0

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self.inits += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:  # noqa: N802
        if index >= len(self.uuids):
            raise FakeNvmlError("Invalid Argument")
        return self.uuids[index]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:  # noqa: N802
        if uuid not in self.uuids and uuid not in self.mig:
            raise FakeNvmlError("Not Found")
        return uuid

    def nvmlDeviceIsMigDeviceHandle(self, handle: str) -> bool:  # noqa: N802
        return handle in self.mig

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: str) -> str:  # noqa: N802
        if handle not in self.mig:
            raise FakeNvmlError("Invalid Argument")
        return self.mig[handle]

    def _use(self, handle: str) -> int:
        """A board sensor read through ``handle``: the GPU's position; a MIG handle refuses."""
        self.handles_used.append(handle)
        if handle in self.mig:
            raise FakeNvmlError("Not Supported")
        return self.uuids.index(handle)

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.uuids)

    def nvmlDeviceGetUUID(self, handle: str) -> str:  # noqa: N802
        return handle

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: str) -> int:  # noqa: N802
        return 700_000  # mW

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> Any:  # noqa: N802
        if handle in self.mig:  # a slice's own memory
            self.handles_used.append(handle)
            return SimpleNamespace(free=6 * 2**30, total=10 * 2**30, used=4 * 2**30)
        position = self._use(handle)
        return SimpleNamespace(free=(10 + position) * 2**30, total=80 * 2**30, used=0)

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:  # noqa: N802
        return 40 + self._use(handle)

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:  # noqa: N802
        return 1000 + self._use(handle)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:  # noqa: N802
        self._use(handle)
        ticks = int(self.clock() / self.update_s)
        return round(ticks * self.update_s * self.watts * 1000)  # mJ

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:  # noqa: N802
        self._use(handle)
        return round(self.watts * 1000)  # mW


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


#: An Apple silicon Mac with a native Python, for MPS adapters built on fakes.
MAC_FACTS_ARM = MacFacts("Darwin", "arm64", "14.5", rosetta=False)


# --- MPS: no float64 ----------------------------------------------------------------------------
MPS_FLOAT64_ERROR = ("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't "
                     "support float64. Please use float32 instead.")


def _wants_float64(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    import torch

    return kwargs.get("dtype") == torch.float64 or any(a is torch.float64 for a in args[1:])


def _goes_to_cpu(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    import torch

    targets = [kwargs.get("device"), *args[1:]]
    return any(str(t) == "cpu" or (isinstance(t, torch.device) and t.type == "cpu")
               for t in targets if t is not None)


def mps_like_tensor(data: Any) -> Any:
    """A tensor that behaves like one on MPS: converting it to float64 on the device raises as
    MPS does; ``.cpu()`` (or ``.to("cpu")``) gives a plain CPU tensor that converts freely."""
    import torch

    class MpsLikeTensor(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func is torch.Tensor.double or (
                    func is torch.Tensor.to and _wants_float64(args, kwargs)
                    and not _goes_to_cpu(args, kwargs)):
                raise TypeError(MPS_FLOAT64_ERROR)
            if func is torch.Tensor.cpu or (func is torch.Tensor.to and _goes_to_cpu(args, kwargs)):
                with torch._C.DisableTorchFunctionSubclass():
                    return func(*args, **kwargs).as_subclass(torch.Tensor).clone()
            return super().__torch_function__(func, types, args, kwargs)

    return torch.as_tensor(data, dtype=torch.float32).as_subclass(MpsLikeTensor)


# --- torch's once-per-process warnings ----------------------------------------------------------
class WarnsOncePerProcess:
    """An op that warns like TORCH_WARN_ONCE (the MPS CPU-fallback warning): the first call in
    the process only, unless ``torch.set_warn_always(True)`` is in force."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.warned = False

    def __call__(self) -> None:
        import torch

        if not self.warned or torch.is_warn_always_enabled():
            self.warned = True
            warnings.warn(self.message, UserWarning, stacklevel=2)


class FakeEvent:
    """A timing event in a FakeQueueAdapter's queue: it completes when the work queued before it
    is done. ``elapsed_time`` of an incomplete event raises, as CUDA's does. As torch's, the
    object holds no device event until its first ``record()`` creates one (CUDAEvent.h: "constructed
    lazily when first recorded"), which the adapter is told of (``event_created``)."""

    def __init__(self, adapter: FakeAsyncAdapter) -> None:
        self.adapter = adapter
        self.done_at: float | None = None
        self.created = False

    def record(self) -> None:
        if not self.created:
            self.created = True
            getattr(self.adapter, "event_created", lambda: None)()
        self.done_at = self.adapter.queue_marker()

    def elapsed_time(self, end_event: FakeEvent) -> float:
        now = time.perf_counter()
        for event in (self, end_event):
            if event.done_at is None or event.done_at > now:
                raise RuntimeError("device not ready: event has not completed")
        assert self.done_at is not None and end_event.done_at is not None
        return (end_event.done_at - self.done_at) * 1000.0


class SyncLog:
    """Put before a fake adapter's class (``class Logged(SyncLog, FakeQueueAdapter)``): ``log``
    gets "sync" at each synchronisation, in order with what the test appends itself."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    def synchronize(self, index: int) -> None:
        super().synchronize(index)  # type: ignore[misc]
        self.log.append("sync")


class FakeQueueAdapter(FakeAsyncAdapter):
    """An asynchronous device with a queue: ``enqueue(seconds)`` returns at once (a kernel launch)
    and the device works through its queue in real time; ``synchronize`` (and any host sync
    counted by a HostSyncCounter bound to it) waits until the queue is empty. Timing events
    complete when the device reaches them."""

    pin_memory = False

    def __init__(self) -> None:
        super().__init__()
        self.busy_until = 0.0
        #: Device events created so far (at each event's first record, as torch creates them).
        self.events_created = 0

    def event_created(self) -> None:
        self.events_created += 1

    def enqueue(self, seconds: float) -> None:
        self.busy_until = max(time.perf_counter(), self.busy_until) + seconds

    def queue_marker(self) -> float:
        self.busy_until = max(time.perf_counter(), self.busy_until)
        return self.busy_until

    def drain(self) -> None:
        wait = self.busy_until - time.perf_counter()
        if wait > 0:
            time.sleep(wait)

    def synchronize(self, index: int) -> None:
        super().synchronize(index)
        self.drain()

    def timing_event(self, index: int) -> FakeEvent:
        return FakeEvent(self)


#: Tensor methods that make the host wait for the device (a host sync) on an accelerator.
HOST_SYNC_METHODS = frozenset({"item", "__bool__", "cpu", "tolist", "numpy", "__float__",
                               "__int__"})


class HostSyncCounter(TorchFunctionMode):
    """Counts host syncs (``.item()``, ``bool(t)``, ``.cpu()``, ... including those inside
    ``GradScaler.get_scale()``) while active; bound to a FakeQueueAdapter, each one also waits for
    the fake device's queue, as it would on the hardware. ``enabled`` pauses counting."""

    def __init__(self, adapter: FakeQueueAdapter | None = None) -> None:
        super().__init__()
        self.adapter = adapter
        self.count = 0
        self.enabled = True

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if self.enabled and getattr(func, "__name__", "") in HOST_SYNC_METHODS:
            self.count += 1
            if self.adapter is not None:
                self.adapter.drain()
        return func(*args, **(kwargs or {}))


# --- MPS: timing events and the command queue ---------------------------------------------------
class MpsLikeEvent:
    """``torch.Event`` on MPS as aten/src/ATen/mps/MPSEvent.mm and MPSGuardImpl.mm make it:

    - ``record()`` commits the command buffer (MPSGuardImpl::record passes syncEvent=true):
      counted in ``queue.commits``;
    - its timestamp is when the device reaches it, so two events with no device work between
      them complete at the same instant (behind queued work: the pair around a fetch in a
      device-bound step);
    - ``elapsed_time`` waits for the whole stream (COMMIT_AND_WAIT), then raises "End event N was
      not recorded after start event M" unless the end's time is after the start's;
    - an event recorded again reads its previous recording's timestamp (releases before the
      per-record timing generations: the completion flag left set by the last read).
    """

    _ids = iter(range(1, 1 << 62))

    def __init__(self, queue: Any, enable_timing: bool = True) -> None:
        self.queue = queue
        self.id = next(self._ids)
        self.enable_timing = enable_timing
        self.stamps: list[float] = []

    def record(self, stream: Any = None) -> None:
        self.queue.commits += 1
        self.stamps.append(self.queue.queue_marker())

    def _stamp(self) -> float:
        if not self.stamps:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return self.stamps[-2] if len(self.stamps) > 1 else self.stamps[0]

    def elapsed_time(self, end_event: MpsLikeEvent) -> float:
        self.queue.drain()
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Events were not created with argument 'enable_timing=True'")
        start, end = self._stamp(), end_event._stamp()
        if not end > start:
            raise RuntimeError(f"End event {end_event.id} was not recorded after start event {self.id}")
        return (end - start) * 1000.0


class FakeMpsGpu:
    """An Apple GPU behind a fake ``torch`` for the real MpsAdapter: ``enqueue(seconds)`` queues
    device work that runs in real time, ``torch.mps.synchronize`` waits for it, and ``event``
    stands in for ``torch.Event`` (an :class:`MpsLikeEvent`; ``commits`` counts their records)."""

    def __init__(self) -> None:
        self.busy_until = 0.0
        self.commits = 0
        self.syncs = 0

    def enqueue(self, seconds: float) -> None:
        self.busy_until = max(time.perf_counter(), self.busy_until) + seconds

    def queue_marker(self) -> float:
        self.busy_until = max(time.perf_counter(), self.busy_until)
        return self.busy_until

    def drain(self) -> None:
        wait = self.busy_until - time.perf_counter()
        if wait > 0:
            time.sleep(wait)

    def synchronize(self) -> None:
        self.syncs += 1
        self.drain()

    def event(self, device: Any = None, *, enable_timing: bool = False, **_: Any) -> MpsLikeEvent:
        return MpsLikeEvent(self, enable_timing)

    def torch(self) -> Any:
        module = fake_torch(mps_built=True, mps_available=True, accelerator="mps",
                            accelerator_count=1)
        module.mps = SimpleNamespace(synchronize=self.synchronize,
                                     current_allocated_memory=lambda: 0)
        return module


class StaleOnReuseEvent(FakeEvent):
    """A FakeEvent that, recorded again, reads its previous recording's timestamp (as MPS's did
    before torch's per-record timing generations)."""

    def __init__(self, adapter: FakeAsyncAdapter) -> None:
        super().__init__(adapter)
        self.recorded: list[float] = []

    def record(self) -> None:
        super().record()
        assert self.done_at is not None
        self.recorded.append(self.done_at)
        self.done_at = self.recorded[-2] if len(self.recorded) > 1 else self.recorded[0]


class UnreadableEvent(FakeEvent):
    """A timing event whose reading fails (a driver error, a lost device)."""

    def elapsed_time(self, end_event: FakeEvent) -> float:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


class EventQueueAdapter(FakeQueueAdapter):
    """A FakeQueueAdapter whose timing events are made by ``make_event(adapter)``."""

    def __init__(self, make_event: Any) -> None:
        super().__init__()
        self.make_event = make_event
        self.events: list[Any] = []

    def timing_event(self, index: int) -> Any:
        self.events.append(self.make_event(self))
        return self.events[-1]


# --- a GPU's matrix products: host launch cost, device time by FLOPs ----------------------------
class FakeGpuProducts(TorchFunctionMode):
    """While active, ``torch.mm`` runs the way it does on a GPU behind ``adapter`` (a
    FakeQueueAdapter): the host spends ``launch_s`` (a busy wait, like a kernel launch) and
    returns at once with a result of the right shape (zeros: nothing is computed), and the
    device's queue gets 2mkn / ``flops`` seconds
    of work. Small products are launch-bound, large ones device-bound, as on the hardware."""

    def __init__(self, adapter: FakeQueueAdapter, flops: float = 1e11,
                 launch_s: float = 50e-6) -> None:
        super().__init__()
        self.adapter, self.flops, self.launch_s = adapter, flops, launch_s
        self.launches = 0
        self._results: dict[tuple[int, int], Any] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        import torch

        if func not in (torch.mm, torch.Tensor.mm):
            return func(*args, **(kwargs or {}))
        first, second = args[0], args[1]
        (m, k), n = first.shape, second.shape[1]
        end = time.perf_counter() + self.launch_s
        while time.perf_counter() < end:
            pass
        self.launches += 1
        self.adapter.enqueue(2.0 * m * k * n / self.flops)
        if (m, n) not in self._results:
            self._results[m, n] = first.new_zeros((m, n))
        return self._results[m, n]


class PowerCappedGpu(FakeQueueAdapter):
    """A 700 W part at its power limit: after ``idle_s`` of idle the device runs ``boost_s`` of
    work at ``burst_flops``, then at ``capped_flops`` while it stays busy, and NVML's words for it
    (``sensors``): "software power cap" at ``capped_mhz`` while capped, the boost clock before.
    Products reach it through :class:`PowerCappedProducts`."""

    def __init__(self, burst_flops: float = 2e11, capped_flops: float = 1e11, boost_s: float = 0.03,
                 idle_s: float = 0.2, capped_mhz: float = 1410.0, boost_mhz: float = 1980.0) -> None:
        super().__init__()
        self.burst_flops, self.capped_flops = burst_flops, capped_flops
        self.boost_s, self.idle_s = boost_s, idle_s
        self.capped_mhz, self.boost_mhz = capped_mhz, boost_mhz
        self.boost_left = boost_s

    def device_seconds(self, flop: float) -> float:
        """The device time of ``flop`` queued now: boosted while the budget lasts (refilled by
        ``idle_s`` of idle), capped after."""
        now = time.perf_counter()
        if now - self.busy_until >= self.idle_s:
            self.boost_left = self.boost_s
        boosted = min(self.boost_left, flop / self.burst_flops)
        self.boost_left -= boosted
        return boosted + (flop - boosted * self.burst_flops) / self.capped_flops

    def sensors(self, index: int) -> dict[str, Any]:
        busy = self.busy_until > time.perf_counter()
        capped = busy and self.boost_left <= 0
        return {"gpu_sm_clock_mhz": self.capped_mhz if capped else self.boost_mhz,
                "gpu_clock_events": ["software power cap"] if capped else [] if busy else ["gpu idle"]}


class PowerCappedProducts(FakeGpuProducts):
    """FakeGpuProducts whose device time is a PowerCappedGpu's (boost, then the power cap)."""

    def __init__(self, adapter: PowerCappedGpu, launch_s: float = 50e-6) -> None:
        super().__init__(adapter, adapter.capped_flops, launch_s)
        self.gpu = adapter

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        import torch

        if func not in (torch.mm, torch.Tensor.mm):
            return func(*args, **(kwargs or {}))
        first, second = args[0], args[1]
        (m, k), n = first.shape, second.shape[1]
        self.launches += 1
        self.gpu.enqueue(self.gpu.device_seconds(2.0 * m * k * n))
        return first.new_zeros((m, n))
