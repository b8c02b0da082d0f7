"""The measured peak FLOP/s of a device: the best rate of large square matrix products, measured
under a precision's own settings (fp32, TF32, bf16, fp16, autocast).

Achieved FLOP/s of a workload means little alone; against what the same device reaches on its
most favourable kernel, in the same precision, it becomes a utilisation. Three rules keep that
ceiling honest:

* **Measured under the case's precision.** A tf32 case is held against the TF32 matmul rate and
  an amp-bf16 case against the bf16 rate, never against fp32; the cache key names the settings
  (dtype, fp32 matmul precision). Autocast computes its products in the autocast dtype, so an amp
  case's peak is that dtype's pure product, operands cast once before timing: under autocast
  every product of fp32 operands would cast both again (autocast caches casts only of leaf
  tensors that require grad), and the casts would count as product time. amp-bf16 and bf16 share
  one peak, the one the roofline shows.
* **Timed without launch and sync overhead.** One product per synchronisation understates a
  fast device (a 4096² bf16 product takes about 0.2 ms on an H100, comparable to launch + sync),
  so the side grows until one product takes ``MIN_PRODUCT_S``, and each repeat queues enough
  products back to back to last ``MIN_REPEAT_S`` with one synchronisation at its end.
* **A ceiling only rises, and a low one is corrected.** A measurement taken while the machine
  was busy reads low and would inflate every ``% peak`` after it, so the cache keeps the best
  figure seen. An ordinary case never beats the peak, so waiting for one would never correct a
  low first reading: a case's lookup re-checks the cached peak with a short measurement (the
  cached side and queue length, ``RECHECK_REPEATS`` windows) when its last check is more than
  ``RECHECK_AFTER_S`` old, and keeps the higher figure. It is measured in full (and kept if
  higher) when a case beats it or the entry is older than ``MAX_AGE_DAYS``; only an explicit
  ``refresh`` replaces it.
* **A busy reading does not stand as the ceiling.** Each measurement records the conditions it
  ran under (``devices/contention.py``: other processes' share of the CPUs and stolen time over
  its own window; the 1-minute load beside them) with the cached peak. A CPU reading taken while
  others used ``BUSY_OTHERS_SHARE`` of the CPUs (or the hypervisor stole ``BUSY_STEAL_SHARE``),
  or any reading far below the last good one (``FAR_BELOW``), is marked ``busy``. A busy entry
  is not trusted for the next run, however recent: its lookup re-measures it in full (a busy
  reading also calibrates too small a product) as soon as a short probe finds the machine
  quiet, or clearly less busy than it was (``LESS_BUSY``), and at most once a minute while it
  stays as busy; the best reading is kept, and a quiet one clears the mark.
  So a run started seconds after a busy one does not inherit its figure, as it did for the
  minute the re-check waited. A refresh never replaces a good figure with a busy one. A good
  figure whose latest re-check ran on a busy machine stands, marked ``re-checked`` (the reason
  in ``recheck_busy``) until a check reads the machine quiet: on the CPU after other work, at
  once when a short probe finds it quiet.

* **A capped figure says so.** The device's clock and clock-event reasons are sampled while the
  windows run (``peak_clocks.py``); a slowdown reason (a power cap) is stored with the figure
  (``limited_by``, with the SM clock), and beside it a short burst (single products after idle).

The figures live in ``data_home()/peak_flops.json`` (``ACCELBENCH_PEAK_CACHE`` overrides the
path, so tests can share one measurement; ``peak_keys.py`` names the file and its keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeGuard

import torch

from accelbench.devices import Device, contention
from accelbench.devices.contention import Conditions
from accelbench.devices.numerics import Precision, precision_settings
from accelbench.measure.ceilings.peak_clocks import ClockWatch, PeakClocks, short_burst
from accelbench.measure.ceilings.peak_keys import CACHE_VERSION as CACHE_VERSION
from accelbench.measure.ceilings.peak_keys import (
    cache_key,
    cache_path,
    product_precision,
    read_cache,
    settings_key,
    write_cache,
)
from accelbench.measure.loop.clock import synced_seconds
from accelbench.measure.loop.queued import best_window, queue_length

#: Sides tried grow from MIN_SIDE by doubling until one product takes MIN_PRODUCT_S.
MIN_SIDE = 256
CPU_MAX_SIDE = 2048
ACCELERATOR_MAX_SIDE = 16384
MIN_PRODUCT_S = 0.02
#: Each repeat queues products back to back for at least this long between two syncs.
MIN_REPEAT_S = 0.1
REPEATS = 5
MAX_AGE_DAYS = 30
#: A case's lookup re-checks a peak last checked longer ago than this (a run minutes after a
#: busy one corrects its low reading; back-to-back cases share one re-check) ...
RECHECK_AFTER_S = 60.0
#: ... with this many timed windows at the cached side (about 0.4 s for fp32 on a 2-core CPU).
RECHECK_REPEATS = 2
#: A reading below this share of the last good one was taken on a busy device, whatever the
#: host's CPU accounting says (another process on the GPU).
FAR_BELOW = 0.7
#: A busy CPU peak is measured again when other work takes this much less of the machine now.
LESS_BUSY = 0.1
#: Operands larger than this are tiled from one random block of this side: drawing 16384²
#: normal numbers on the host takes seconds, longer than the measurement itself.
OPERAND_BLOCK = 2048


def _operands(device: Device, precision: Precision, side: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two ``side``² operands in the precision's dtype on the device (seeded)."""
    generator = torch.Generator().manual_seed(0)
    block = min(side, OPERAND_BLOCK)
    tiles = -(-side // block)

    def operand() -> torch.Tensor:
        drawn = torch.randn(block, block, generator=generator).to(device.torch_device,
                                                                  precision.param_dtype)
        return drawn if tiles == 1 else drawn.repeat(tiles, tiles)[:side, :side].contiguous()

    return operand(), operand()


def _timed_products(device: Device, precision: Precision, a: torch.Tensor, b: torch.Tensor,
                    count: int) -> float:
    """Seconds for ``count`` products queued back to back, one synchronisation at the end. The
    operands are already in the product's dtype: nothing but the products is timed."""
    return synced_seconds(device, lambda: torch.mm(a, b), count)


@dataclass(frozen=True)
class MatmulTiming:
    flops: float
    side: int
    products_per_sync: int
    repeats: int
    #: The clock and what held it back while the windows ran.
    clocks: PeakClocks = field(default_factory=PeakClocks)
    #: The short burst beside the windowed figure (accelerators' full measurements; else None).
    burst_flops: float | None = None


def time_matmul(device: Device, precision: Precision | torch.dtype | str,
                side: int | None = None, repeats: int = REPEATS,
                products: int | None = None) -> MatmulTiming:
    """FLOP/s of the fastest repeat of square products under ``precision``'s settings (an
    autocast precision: the pure products of its autocast dtype, see :func:`product_precision`).

    Without ``side``, the side doubles from MIN_SIDE until one product takes MIN_PRODUCT_S (a
    larger side on faster devices). Each repeat runs ``n`` products between two syncs, with n
    chosen so a repeat lasts MIN_REPEAT_S: launch and sync latency are then a small share.
    ``side`` and ``products`` together skip the calibration (a re-check of a cached peak).
    The device's clock-event reasons are read during the windows; a full measurement on an
    accelerator also times a short burst (``peak_clocks.short_burst``) after them."""
    p = product_precision(precision)
    largest = CPU_MAX_SIDE if device.is_cpu else ACCELERATOR_MAX_SIDE
    grow = side is None
    side = side or MIN_SIDE
    recheck = products is not None and not grow
    single = 0.0
    with precision_settings(p, device):
        while True:
            a, b = _operands(device, p, side)
            _timed_products(device, p, a, b, 1)  # kernel choice, library start, lazy allocation
            if recheck:
                break
            # the better of two, so one descheduled product does not stop the growth
            single = min(_timed_products(device, p, a, b, 1) for _ in range(2))
            if not grow or single >= MIN_PRODUCT_S or side * 2 > largest:
                break
            side *= 2

        def timed(count: int) -> float:
            return _timed_products(device, p, a, b, count)

        count = products if products is not None and recheck else queue_length(timed, single, MIN_REPEAT_S)
        watch = ClockWatch(device)
        watch.start()
        try:
            count, best = best_window(timed, count, repeats, MIN_REPEAT_S)
        finally:
            clocks = watch.stop()
        burst = None if recheck or not device.is_async else short_burst(lambda: timed(1), 2.0 * side**3)
    return MatmulTiming(2.0 * side**3 * count / best, side, count, repeats, clocks, burst)


@dataclass(frozen=True)
class PeakFigure:
    """The peak a utilisation was computed against, as stored in each result."""

    flops: float
    key: str
    settings: str
    measured_at: str
    matrix_side: int | None = None
    products_per_sync: int | None = None
    #: What held the clock back while it was timed (a power cap: the figure is capped), and the
    #: SM clock then; () and None where nothing did or nothing was read.
    limited_by: tuple[str, ...] = ()
    clock_mhz: float | None = None
    #: The short burst beside it (single products after idle), where measured.
    burst_flops: float | None = None
    #: Why it was measured on a busy machine ("" when not): a figure still to be re-measured.
    busy: str = ""
    #: A good figure's: why its latest re-check ran on a busy machine ("" when it did not).
    recheck_busy: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"peak_flops": self.flops, "peak_settings": self.settings,
                "peak_measured_at": self.measured_at, "peak_matrix_side": self.matrix_side,
                "peak_products_per_sync": self.products_per_sync,
                "peak_limited_by": list(self.limited_by), "peak_clock_mhz": self.clock_mhz,
                "peak_burst_flops": self.burst_flops, "peak_busy": self.busy,
                "peak_recheck_busy": self.recheck_busy}

    def method(self) -> dict[str, Any]:
        """How it was measured, as the roofline stores it per matmul figure."""
        return {"matrix_side": self.matrix_side, "products_per_sync": self.products_per_sync,
                "limited_by": list(self.limited_by), "clock_mhz": self.clock_mhz,
                "burst_flops": self.burst_flops, "busy": self.busy}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _valid(entry: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(entry, dict) and isinstance(entry.get("flops"), int | float) \
        and not isinstance(entry.get("flops"), bool) and entry["flops"] > 0


def _checked_within(entry: dict[str, Any], now: datetime, age: timedelta) -> bool:
    try:
        checked = datetime.fromisoformat(str(entry.get("checked_at") or entry["measured_at"]))
    except (KeyError, ValueError):
        return False
    return now - checked <= age


def _is_old(entry: dict[str, Any], now: datetime) -> bool:
    return not _checked_within(entry, now, timedelta(days=MAX_AGE_DAYS))


def _figure(key: str, settings: str, entry: dict[str, Any]) -> PeakFigure:
    clock, burst = entry.get("clock_mhz"), entry.get("burst_flops")
    return PeakFigure(float(entry["flops"]), key, settings, str(entry.get("measured_at", "")),
                      entry.get("matrix_side"), entry.get("products_per_sync"),
                      tuple(str(word) for word in entry.get("limited_by") or ()),
                      float(clock) if isinstance(clock, int | float) else None,
                      float(burst) if isinstance(burst, int | float) else None,
                      str(entry.get("busy") or ""),
                      "" if entry.get("busy") else str(entry.get("last_busy") or ""))


def cached_figure(device: Device, precision: Precision | torch.dtype | str) -> PeakFigure | None:
    """The cached peak as it stands (never measured here); None when there is none."""
    key = cache_key(device, precision)
    entry = read_cache(cache_path()).get(key)
    return _figure(key, settings_key(precision), entry) if _valid(entry) else None


def peak_figure(device: Device, precision: Precision | torch.dtype | str = torch.float32, *,
                refresh: bool = False, at_least: float | None = None,
                side: int | None = None, recheck: bool = True) -> PeakFigure:
    """The device's peak FLOP/s under ``precision``: the cached best unless it must be measured.

    Measured when absent, older than MAX_AGE_DAYS, below ``at_least`` (a case achieved more:
    the ceiling was read at a bad moment), or marked busy while the machine is quiet now;
    re-checked with a short measurement (``recheck``) when last checked more than
    RECHECK_AFTER_S ago, so a low reading left by a busy machine is raised by the next run. A
    new reading replaces the cached one only when higher. ``refresh`` measures and replaces
    whatever was cached (never with a busy reading)."""
    key, settings = cache_key(device, precision), settings_key(precision)
    entries = read_cache(cache_path())
    cached = entries.get(key) if _valid(entries.get(key)) else None
    now = _now()
    if cached is not None and not refresh and not _is_old(cached, now) \
            and (at_least is None or cached["flops"] >= at_least):
        if cached.get("busy"):
            # Measured beside other work: never the next run's ceiling. Re-measured in full at
            # once when the machine is quieter than it was, and while it stays as busy at most
            # once a minute (a heavy load can read a fiftieth of the peak, and a reading under
            # a lighter one still raises it; the best reading is kept either way).
            remeasure = not _checked_within(cached, now, timedelta(seconds=RECHECK_AFTER_S)) \
                or _quieter_now(device, cached)
            return _measure(device, precision, side) if remeasure else _figure(key, settings, cached)
        checked = _checked_within(cached, now, timedelta(seconds=RECHECK_AFTER_S))
        if not recheck or (checked and not _quiet_after_busy_check(device, cached)):
            return _figure(key, settings, cached)
        return _recheck(device, precision, cached)
    return _measure(device, precision, side, replace=refresh)


def _quieter_now(device: Device, cached: dict[str, Any]) -> bool:
    """Whether a measurement now could beat a busy one: the CPU's when a short probe finds no
    other work on it, or clearly less than when the cached figure was read (under heavy load a
    CPU peak can read a fiftieth of itself, and a less busy reading is still far closer); an
    accelerator's always (its busy mark came from a far-low reading)."""
    if not device.is_cpu:
        return True
    try:
        now = contention.now()
    except Exception:  # a machine that does not say: measure, the reading is judged anyway
        return True
    then = Conditions.from_dict(cached.get("conditions"))
    return not now.busy() or then is None or now.load_share() < then.load_share() - LESS_BUSY


def _quiet_after_busy_check(device: Device, cached: dict[str, Any]) -> bool:
    """Whether a good CPU peak whose latest check ran beside other work is checked again now: a
    short probe finds the machine quiet (the check then clears its mark). A check that read far
    low on a quiet machine, and an accelerator's (a probe of the CPUs says nothing of it), wait
    RECHECK_AFTER_S: a probe would find nothing new."""
    then = Conditions.from_dict(cached.get("last_conditions"))
    if not cached.get("last_busy") or not device.is_cpu or then is None or not then.busy():
        return False
    try:
        return not contention.now().busy()
    except Exception:  # a machine that does not say: the minute's re-check will come
        return False


def timed_matmul(device: Device, precision: Precision | torch.dtype | str, side: int | None = None,
                 repeats: int = REPEATS, products: int | None = None) -> tuple[MatmulTiming, Conditions]:
    """:func:`time_matmul` with the conditions it ran under (other work on the machine)."""
    watch = contention.ContentionWatch()
    watch.start()
    timing = time_matmul(device, precision, side) if repeats == REPEATS and products is None \
        else time_matmul(device, precision, side, repeats, products)
    measured = timing if isinstance(timing, MatmulTiming) else MatmulTiming(
        float(timing), side or 0, 1, repeats)  # tests stand in a timer that returns a float
    return measured, watch.stop()


def _measure(device: Device, precision: Precision | torch.dtype | str, side: int | None,
             replace: bool = False) -> PeakFigure:
    measured, conditions = timed_matmul(device, precision, side)
    return record_measurement(device, precision, measured, replace=replace, conditions=conditions)


def _recheck(device: Device, precision: Precision | torch.dtype | str,
             cached: dict[str, Any]) -> PeakFigure:
    side, products = cached.get("matrix_side"), cached.get("products_per_sync")
    try:
        timing, conditions = timed_matmul(
            device, precision, side if isinstance(side, int) and side > 0 else None,
            RECHECK_REPEATS, products if isinstance(products, int) and products > 0 else None)
    except Exception:  # the re-check is a courtesy: the cached peak stands without it
        return _figure(cache_key(device, precision), settings_key(precision), cached)
    return record_measurement(device, precision, timing, conditions=conditions)


def busy_reason(device: Device, flops: float, conditions: Conditions | None,
                cached: dict[str, Any] | None) -> str:
    """Why a reading of ``flops`` was taken on a busy machine ("" when it was not): other work
    on the CPUs or stolen time (a CPU's reading only: the CPUs are what it measures), or a
    reading far below the last good one (any device)."""
    reasons = []
    if device.is_cpu and conditions is not None and conditions.busy():
        reasons.append(conditions.busy())
    if cached is not None and not cached.get("busy") and flops < FAR_BELOW * float(cached["flops"]):
        reasons.append(f"it read {flops / 1e9:,.1f} GFLOP/s, far below the last good "
                       f"{float(cached['flops']) / 1e9:,.1f}")
    return "; ".join(reasons)


def record_measurement(device: Device, precision: Precision | torch.dtype | str,
                       measured: MatmulTiming, *, replace: bool = False,
                       conditions: Conditions | None = None) -> PeakFigure:
    """Add a fresh reading, taken under ``conditions``, to the cache: it becomes the peak when
    higher (or with ``replace``, unless other work ran beside it and the cached one is not
    busy), marked busy when it was taken on a busy machine (see :func:`busy_reason`)."""
    path = cache_path()
    key, settings = cache_key(device, precision), settings_key(precision)
    entries = read_cache(path)
    cached = entries.get(key) if _valid(entries.get(key)) else None
    stamp = _now().isoformat(timespec="seconds")
    busy = busy_reason(device, measured.flops, conditions, cached)
    last = {"checked_at": stamp, "last_flops": measured.flops, "last_busy": busy,
            "last_conditions": conditions.to_dict() if conditions is not None else None}
    # A refresh may lower the figure (a driver, a power limit), but never because other work
    # ran beside it; a far-low refreshed figure is kept, marked busy, and confirmed next run.
    other_work = device.is_cpu and conditions is not None and bool(conditions.busy())
    keep = cached is not None and (cached["flops"] >= measured.flops if not replace
                                   else other_work and not cached.get("busy"))
    if keep:
        assert cached is not None
        entry = {**cached, **last}
        if cached.get("busy") and not busy:
            entry["busy"] = ""  # a quiet reading no higher: the cached figure is no busy low
    else:
        # the clocks describe the windows the figure came from: they go with it
        entry = {"flops": measured.flops, "matrix_side": measured.side,
                 "products_per_sync": measured.products_per_sync, "repeats": measured.repeats,
                 "measured_at": stamp, "busy": busy, "conditions": last["last_conditions"],
                 **measured.clocks.to_dict(), **last}
    bursts = [b for b in (measured.burst_flops, (cached or {}).get("burst_flops"))
              if isinstance(b, int | float)]
    entry["burst_flops"] = max(bursts) if bursts else None  # the best short burst seen
    entries[key] = entry
    write_cache(path, entries)
    return _figure(key, settings, entry)


def measured_peak_flops(device: Device, precision: Precision | torch.dtype | str = torch.float32,
                        *, refresh: bool = False, side: int | None = None) -> float:
    """Peak FLOP/s of ``device`` under ``precision`` (a Precision, its name or a dtype)."""
    return peak_figure(device, precision, refresh=refresh, side=side).flops
