"""Measuring one case in this process: build the workload on its device under the case's
precision settings, warm up, run the timed loop with its trackers, and fill the case's result
(exceptions become its status). Every subcommand that measures steps goes through here."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import torch

from accelbench.data.options import DataOptions
from accelbench.data.placement import POOL_LABEL, device_pool_bytes, place_batches, source_kind
from accelbench.devices import Device
from accelbench.devices.compilation import INDUCTOR, CompileSpec
from accelbench.devices.numerics import (
    Precision,
    autocast,
    backend_flags,
    get_precision,
    precision_settings,
    prepare_model,
    unsupported_reason,
)
from accelbench.devices.precisions import precision_spec
from accelbench.engine.case import Case, generation_rounds, record_error, skeleton_result
from accelbench.engine.spec import RankPlan
from accelbench.engine.steps import make_eval_step, make_train_step
from accelbench.measure.compiled import compile_module
from accelbench.measure.data_parallel import CaseHooks
from accelbench.measure.loop.step_loop import Progress, StepLoop
from accelbench.measure.trackers.energy import energy_meter_for
from accelbench.measure.trackers.interval_sensors import DeviceSensors
from accelbench.measure.trackers.region import EnergyTracker, MemoryTracker, SensorTracker, Tracker
from accelbench.options import RunOptions
from accelbench.results import CaseResult, Energy, Flops, Sensors
from accelbench.results.first_use import phases
from accelbench.results.generation import Generation
from accelbench.results.sustained import SustainedRecord
from accelbench.workloads.base import Workload
from accelbench.workloads.catalogue import get_workload_class
from accelbench.workloads.presets import GENERATE


def _epoch_samples(batches: Iterable[Any], fallback: int) -> int:
    dataset = getattr(batches, "dataset", None)
    if dataset is not None and hasattr(dataset, "__len__"):
        return len(dataset)
    return int(getattr(batches, "dataset_size", fallback))


def _make_step(workload: Workload, model: torch.nn.Module, case: Case) -> Callable[[Any], Any]:
    precision = get_precision(case.precision)
    # Compiled: the full batch's graphs stay static when an epoch's partial batch comes (steps.py).
    static_batch = case.batch_size if case.compile_backend else None
    if case.mode == "train":
        optimizer = workload.make_optimizer(model)
        return make_train_step(workload, model, optimizer, case.device, precision,
                               case.channels_last, static_batch=static_batch)
    return make_eval_step(workload, model, case.device, precision, case.channels_last,
                          static_batch=static_batch)


def run_case(case: Case, options: RunOptions, progress: Progress | None = None,
             rank: RankPlan | None = None) -> CaseResult:
    """Set up, warm up and measure one case in this process. Exceptions become its status.

    ``rank``, where the case runs as one rank of a torchrun world (the spec's plan), says how
    it is measured there (measure/data_parallel.py: the model wrapper, the per-rank seed,
    barriers, the agreed step count, the no-sync phase, whose times go to ``result.scale``);
    without one, the case is measured on its own.

    The case's device is current for all of it, from before anything touches the device
    (otherwise cuda:N's pinned-memory threads, stray allocations and timing events land on
    GPU 0) to after its peak is measured; the device current before is current again after, so
    an inline run (``--isolation none``) over several devices leaks none into the next case."""
    with contextlib.ExitStack() as current:
        try:
            current.enter_context(case.device.current())
        except Exception as error:  # a device that cannot be selected is the case's status
            return record_error(skeleton_result(case, options), error)
        hooks = rank.hooks() if rank is not None else CaseHooks()
        result = _run_case_here(case, options, progress, hooks)
    if rank is not None:
        result.scale = rank.figures(hooks.nosync_step_times)
    return result


def _run_case_here(case: Case, options: RunOptions, progress: Progress | None,
                   hooks: CaseHooks) -> CaseResult:
    workload = get_workload_class(case.workload)(options.size)
    result = skeleton_result(case, options)
    try:
        result.device_name = str(case.device.info().get("name", case.device.name))
    except Exception as error:  # describing the device is not worth failing the case over
        result.device_name = f"{case.device.name} ({type(error).__name__})"
    unavailable = workload.unavailable_reason()
    if unavailable:
        result.status, result.error = "unavailable", unavailable
        return result
    if case.mode != GENERATE:
        result.tokens_per_sample = workload.tokens_per_sample(case.mode)
    precision = get_precision(case.precision)
    unsupported = unsupported_reason(case.device, precision) or quantized_unsupported(case)
    if unsupported:
        result.status, result.error = "unsupported", unsupported
        return result
    try:
        with precision_settings(precision, case.device, cudnn_benchmark=options.cudnn_benchmark):
            result.backend_flags = backend_flags(case.device)  # fp32 = TF32 off, in the record
            if case.mode == GENERATE:
                _measure_generation(case, workload, options, result, hooks)
            else:
                _measure(case, workload, options, result, progress, hooks)
    except Exception as error:
        record_error(result, error)
    if result.ok and case.mode != GENERATE and hooks.extras:
        result.flops = Flops.from_dict(achieved_flops(result, case.device, precision), "flops")
    return result


def quantized_unsupported(case: Case) -> str | None:
    """Why the case's weight-only quantized precision cannot run here (no kernel on the device,
    or a mode other than generation); None where it can, or the precision is not quantized."""
    from accelbench.devices.quantized import probe
    from accelbench.measure.generation.torchao_quant import torchao_unsupported

    spec = precision_spec(case.precision)
    if spec.weight_bits is None:
        return None
    if case.mode != GENERATE:
        return f"{case.precision} quantizes weights for generation (--mode generate) only"
    if spec.library == "torchao":
        return torchao_unsupported(case.device, case.precision)
    return probe(case.device, spec.weight_bits, get_precision(case.precision).param_dtype,
                 spec.group_size or 128)


def achieved_flops(result: CaseResult, device: Device, precision: Precision) -> dict[str, Any]:
    """Achieved FLOP/s (counted FLOPs per sample x samples/s) and its fraction of the device's
    matrix-product peak measured under the case's own precision settings (a tf32 case against
    TF32 products, amp-bf16 against bf16 autocast). The peak used is stored with the figures
    (value, settings, when measured); a case that beats the cached peak has it measured again."""
    from accelbench.measure.ceilings.peak import peak_figure
    from accelbench.measure.ceilings.roofline import cached_sustained_flops
    from accelbench.workloads.facts import flops_per_sample

    dtype = precision.autocast_dtype or precision.param_dtype
    figures: dict[str, Any] = {"peak_dtype": str(dtype).removeprefix("torch."),
                               "peak_precision": precision.name}
    try:
        per_sample = flops_per_sample(result.workload, result.mode, result.size)
        throughput = result.throughput()
        if per_sample is None or throughput is None:
            return {**figures, "error": "FLOPs could not be counted for this workload"}
        achieved = per_sample * throughput
        peak = peak_figure(device, precision, at_least=achieved)
        figures.update(per_sample=per_sample, achieved_flops=achieved, **peak.to_dict(),
                       fraction_of_peak=achieved / peak.flops if peak.flops > 0 else None)
        held = cached_sustained_flops(device, precision.name)  # roofline --sustained, if run
        if held:
            figures.update(sustained_peak_flops=held, fraction_of_sustained_peak=achieved / held)
    except Exception as error:  # the figures are extra; the timing stands without them
        figures["error"] = f"{type(error).__name__}: {error}"
    return figures


def _measure(case: Case, workload: Workload, options: RunOptions, result: CaseResult,
             progress: Progress | None, around: CaseHooks) -> None:
    """The timed steps of a train or eval case. What running as a torchrun rank changes about
    them (the model wrapper, seed, barriers and agreed step count) comes from ``around``
    (measure/data_parallel.py); on its own, nothing."""
    torch.manual_seed(options.seed)  # the same initial weights in every rank
    memory = MemoryTracker(case.device)
    # Sensors, then energy: exited in reverse, so the energy window hugs the measured steps.
    sensors, energy = SensorTracker(case.device), EnergyTracker(energy_meter_for(case.device))
    trackers = around.trackers([sensors, energy])
    with memory:  # the whole case: building the model, warm-up and the measured steps
        model = prepare_model(workload.build_model(), get_precision(case.precision),
                              case.channels_last).to(case.device.torch_device)
        model = around.wrap_model(model, case.mode == "train")
        model = compile_module(model, case.compile_backend)
        data = DataOptions(kind=source_kind(options.data), data_dir=options.data_dir,
                           seed=around.data_seed(options.seed), workers=options.workers,
                           pin_memory=case.device.pin_memory)
        pool = workload.make_batches(case.mode, case.batch_size, data)
        if options.data == "synthetic-device":  # its pool is the harness's memory, not the model's
            memory.note_peak()
        batches = place_batches(pool, options.data, case.device)
        memory.set_aside(device_pool_bytes(batches, options.data, case.device), POOL_LABEL)
        del pool  # the host copy of a device-resident pool is not kept
        result.dataset_size = around.epoch_share(
            _epoch_samples(batches, workload.samples_per_epoch(case.mode)))
        result.steps_per_epoch = -(-result.dataset_size // case.batch_size)
        epoch_end = None
        if case.mode == "train" and type(workload).end_of_epoch is not Workload.end_of_epoch \
                and around.extras:
            def epoch_end() -> dict[str, float]:
                return workload.end_of_epoch(model, case.device.torch_device, data)
        if energy in trackers:
            energy.prepare()  # probing the sources takes up to ~1 s: before warm-up, not timed
        held = DeviceSensors(case.device) if options.stop.kind == "sustained" else None
        loop = StepLoop(_make_step(workload, model, case), batches, case.device, progress,
                        epoch_end, trackers=trackers, batch_size=case.batch_size,
                        partial_batch=result.dataset_size % case.batch_size,
                        sustained_sensors=held, memory=memory)
        measured = around.measure(loop, options.stop, options.warmup_steps)
    measured.copy_into(result)
    if loop.sustained is not None:
        result.sustained = SustainedRecord.judge(loop.sustained)
    _record_trackers(result, memory, [t for t in (sensors, energy) if t in trackers],
                     loop.window_steps)
    # After the peak is read: the profiler's own memory must not count.
    if options.profile and around.extras:
        from accelbench.measure.loop.step_loop import BatchStream
        from accelbench.measure.trackers.profile import profile_case

        result.profile = profile_case(loop.step, BatchStream(batches).next, case.device, model)


def _measure_generation(case: Case, workload: Workload, options: RunOptions,
                        result: CaseResult, hooks: CaseHooks) -> None:
    """Greedy decoding with the KV cache (measure/generation/rounds.py): the figures go to
    ``result.generation``; the step samples are the decode steps (per token where they were
    timed one by one, else each round's mean), so throughput reads as tokens/s over the batch."""
    from accelbench.engine.generation_sections import generation_sections
    from accelbench.measure.generation.quantize import quantize_weights
    from accelbench.measure.generation.recipe import prepare_generation
    from accelbench.measure.generation.rounds import measure_generation
    from accelbench.measure.generation.torchao_quant import case_settings
    from accelbench.workloads.protocols import reads_each_token

    torch.manual_seed(options.seed)
    precision = get_precision(case.precision)
    rounds, warmup, _ = generation_rounds(options)
    memory = MemoryTracker(case.device)
    # Energy over the timed rounds only (measure_generation's ``timed``), where the case is
    # measured with its own trackers (a torchrun rank's are not).
    tracker = EnergyTracker(energy_meter_for(case.device))
    energy = tracker if tracker in hooks.trackers([tracker]) else None
    if energy is not None:
        energy.prepare()  # probing the sources takes up to ~1 s: before warm-up, not timed
    with memory:
        model = prepare_model(workload.build_model(), precision, case.channels_last)
        model = model.to(case.device.torch_device).eval()
        # Weight-only quantization packs each linear layer's weight on the device (its kernels'
        # layout is the device's), before compiling.
        # Compiled by inductor, int8 takes the form it fuses (devices/quantized.FUSED_INT8).
        fused = CompileSpec.parse(case.compile_backend).backend == INDUCTOR
        quantized = (quantize_weights(model, case.precision, case.device, fused=fused)
                     if precision_spec(case.precision).quantized else None)
        runner = prepare_generation(model, case.compile_backend, case.device, workload, case.workload)
        # torchao's inductor settings (set by its quantize_, put back after it) for this case only.
        with torch.no_grad(), autocast(case.device, precision), runner.settings(), \
                case_settings(quantized):
            figures = measure_generation(
                workload, runner.prefill, case.device, batch_size=case.batch_size,
                prompt_len=case.prompt_len, new_tokens=case.new_tokens, rounds=rounds,
                warmup_rounds=warmup, seed=options.seed, memory=memory,
                stream=options.stream or reads_each_token(options.protocol, case.new_tokens),
                casts_each_step=CompileSpec.parse(case.compile_backend).backend not in ("", "eager"),
                decode_model=runner.decode, timed=energy)
        runner.confirm()
    result.generation = Generation.from_dict(
        {**figures.to_dict(), **_decode_against_bandwidth(case.device, figures),
         **generation_sections(case, options, workload, model, figures, quantized),
         "execution": runner.finish().to_dict()}, "generation")
    steps = figures.decode_steps
    per_token = figures.token_times_s
    result.step_times = per_token or ([r.decode_s / steps for r in figures.rounds] if steps
                                      else [r.ttft_s for r in figures.rounds])
    result.warmup_steps, result.stop_reason = figures.warmup_rounds, figures.stop_reason
    # The first whole generation (the catalogue's time_to_first_step_s), not the TTFT it shows apart.
    result.time_to_first_step_s = phases(result, result.generation).first_s
    _record_memory(result, memory)
    if energy is not None and energy.result is not None:
        result.energy = Energy.from_dict(energy.result.generation_figures(
            len(figures.rounds), figures.batch_size * figures.new_tokens), "energy")


#: Bandwidths measured in this process for decode rows where ``roofline`` has measured none, by
#: device name: measured once per process (a warm worker's cases share it), never cached on disk.
_MEASURED_HERE: dict[str, float] = {}


def reference_bandwidth(device: Device) -> tuple[float, str]:
    """(bytes/s, where from): what ``accelbench roofline`` measured for ``device``, else a copy
    measured now, once per process (the buffers a quarter of roofline's: still far beyond any
    last-level cache this code meets)."""
    from accelbench.measure.ceilings.bandwidth import BANDWIDTH_BUFFER_BYTES, memory_bandwidth
    from accelbench.measure.ceilings.roofline import cached_bandwidth

    cached = cached_bandwidth(device)
    if cached is not None:
        return cached, "accelbench roofline (cached)"
    if device.name not in _MEASURED_HERE:
        _MEASURED_HERE[device.name] = memory_bandwidth(device, BANDWIDTH_BUFFER_BYTES // 4, repeats=3)
    return _MEASURED_HERE[device.name], "a device copy measured for this run (roofline had none)"


def _decode_against_bandwidth(device: Device, figures: Any) -> dict[str, Any]:
    """Decoding reads every weight and the cache each step: its effective bandwidth as a share
    of the device's measured bandwidth (above 100% is a measurement error unless the bytes fit in
    the last-level cache), and which bound the row hit (decode_bytes.judge_decode: overhead- or
    bandwidth-bound, with its floor)."""
    from accelbench.devices.cpuinfo import cpu_model
    from accelbench.measure.generation.decode_bytes import decode_judgements

    effective, tpot = figures.effective_bandwidth_bytes_per_s, figures.tpot_s
    if not effective or not tpot:
        return {"bandwidth_share": None, "bandwidth_reference_bytes_per_s": None,
                "bandwidth_verdict": "no decode steps"}
    try:
        measured, source = reference_bandwidth(device)
    except Exception as error:  # the judgement is extra; the timing stands without it
        return {"bandwidth_share": None, "bandwidth_reference_bytes_per_s": None,
                "bandwidth_verdict": f"no bandwidth measured ({type(error).__name__}: {error})"}
    try:
        cache = device.info().get("last_level_cache_bytes")
    except Exception:  # describing the device is not worth losing the judgement over
        cache = None
    return {"bandwidth_reference_bytes_per_s": measured, "bandwidth_reference_source": source,
            "last_level_cache_bytes": cache,
            **decode_judgements(effective, tpot, figures.bytes_per_step, measured, cache, cpu_model())}


def _record_memory(result: CaseResult, memory: MemoryTracker) -> None:
    peak = memory.result
    result.peak_memory_bytes, result.memory_source = peak.bytes, peak.source
    result.memory_is_lower_bound = peak.lower_bound
    result.setup_peak_memory_bytes = peak.setup_bytes


def _record_trackers(result: CaseResult, memory: MemoryTracker, used: list[Tracker],
                     window_steps: int) -> None:
    """The one place the trackers' typed results reach the case's record (of the sensors and
    energy, those the case measured with)."""
    _record_memory(result, memory)
    for tracker in used:
        if isinstance(tracker, SensorTracker):
            # Read just before and right after the measured steps (after warm-up, not at idle).
            result.sensors = Sensors.from_dict(tracker.result.to_dict(), "sensors")
        elif isinstance(tracker, EnergyTracker) and tracker.result is not None:
            result.energy = Energy.from_dict(tracker.result.figures(
                window_steps, result.steps_per_epoch, result.batch_size), "energy")
