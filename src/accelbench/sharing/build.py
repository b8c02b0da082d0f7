"""A bundle from stored runs: one line per case, built field by field (the privacy rule).

Every value is named here: what explains a figure goes in (device model and count, memory, OS,
versions, the comparability key, backend flags, threads, loader workers, power state, validity);
nothing else is read. The key is every field of ``results/key.KEY_FIELDS`` (a field added there is
shared with no edit here) and the figures are the catalogue's (``results/catalogue.case_figures``),
so a bundle says what the run table says (a --protocol case's rate, as every figure, is the one its
table shows: its peer's, ``catalogue.headline``); a generation line adds its decode diagnosis (the
bound, host CPU model, execution recipe and quantized kernel, ``compare/decode_diagnosis.py``).
Host names, user names, paths (data_dir, workload files, the command line), environment variables,
error texts, tracebacks and stderr tails are never copied; a case that did not finish is shared
with its status only. ``privacy.scrub`` then checks every string that did go in against what would
identify this machine's user.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.compare.decode_diagnosis import DecodeDiagnosis
from accelbench.results import CaseResult, RunRecord
from accelbench.results.catalogue import BY_NAME, case_figures
from accelbench.results.key import KEY_FIELDS, comparability_key, key_json
from accelbench.results.process import process_figure
from accelbench.results.protocol_summary import overall_members
from accelbench.sharing import privacy
from accelbench.sharing.bundle import dump_line
from accelbench.store.jsonfile import clean_for_json

#: Only timing runs are shared: a check's or probe's cases time something else.
SHARED_KINDS = ("run",)
SelftestLookup = Callable[[str], Mapping[str, Any] | None]


@dataclass
class Bundle:
    lines: list[str] = field(default_factory=list)
    #: One note per run or case that was left out, and why.
    skipped: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _scalar(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else None


def _power(environment: Mapping[str, Any]) -> dict[str, Any]:
    """Each power fact's value (null where the OS did not say); GPU power limits without the
    GPUs' UUIDs (an UUID names one physical board)."""
    facts = {}
    for name, fact in _dict(environment.get("power")).items():
        value = fact.get("value") if isinstance(fact, dict) else None
        if name == "gpu_power_limit_w" and isinstance(value, dict):
            value = sorted(v for v in value.values() if isinstance(v, int | float))
        elif isinstance(value, dict):
            value = {str(k): _scalar(v) for k, v in value.items()}
        else:
            value = _scalar(value)
        facts[str(name)] = value
    return facts


def _device(record: RunRecord, case: CaseResult) -> dict[str, Any]:
    environment = record.environment
    kind = case.device.split(":", 1)[0]
    info = _dict(_dict(environment.get("devices")).get(case.device))
    count = _dict(_dict(environment.get("availability")).get(kind)).get("count")
    device = {"kind": kind, "model": case.device_name or str(info.get("name") or kind),
              "count": count if isinstance(count, int) else 1,
              "memory_bytes": _scalar(info.get("memory_total_bytes"))}
    for name in ("compute_capability", "driver_version", "macos_version", "cuda_version", "hip_version"):
        if info.get(name) is not None:
            device[name] = _scalar(info.get(name))
    return device


def _host(environment: Mapping[str, Any]) -> dict[str, Any]:
    machine, cpu = _dict(environment.get("machine")), _dict(_dict(environment.get("devices")).get("cpu"))
    return {"os": _scalar(machine.get("system")), "os_release": _scalar(machine.get("release")),
            "architecture": _scalar(machine.get("architecture")), "cpu": _scalar(cpu.get("name")),
            "cores": _scalar(cpu.get("physical_cores")), "logical_cores": _scalar(cpu.get("logical_cores")),
            "memory_bytes": _scalar(cpu.get("memory_total_bytes")),
            "python": _scalar(_dict(environment.get("python")).get("version"))}


def _software(environment: Mapping[str, Any]) -> dict[str, Any]:
    torch, cpu = _dict(environment.get("torch")), _dict(_dict(environment.get("devices")).get("cpu"))
    return {"torch": _scalar(torch.get("version")), "cuda": _scalar(torch.get("cuda_build")),
            "hip": _scalar(torch.get("hip_build")), "cudnn": _scalar(torch.get("cudnn")),
            "blas": _scalar(cpu.get("blas")), "parallel_backend": _scalar(cpu.get("parallel_backend"))}


#: How the headline was sampled, beside the catalogue's figures (names the catalogue does not use).
SAMPLING = ("rate_ci", "p10_step_s", "mean_step_s", "rel_iqr", "epoch_kind", "dataset_size",
            "measured_steps", "steps_per_sample")
assert not set(SAMPLING) & set(BY_NAME), "a sampling detail shadows a catalogue figure"


def _figures(case: CaseResult) -> dict[str, Any]:
    """Every catalogue figure of the case's mode (None where it has none), then how the headline
    was sampled."""
    if not case.ok or case.throughput() is None:
        return {}
    summary = case.summary()
    epoch = case.epoch_time()
    ci = case.throughput_ci()
    sampling = {"rate_ci": list(ci) if ci else None,
                "p10_step_s": process_figure(case.step_times) if case.step_times else None,
                "mean_step_s": summary.mean if summary else None,
                "rel_iqr": summary.rel_iqr if summary else None,
                "epoch_kind": epoch[3] if epoch else None, "dataset_size": case.dataset_size,
                "measured_steps": case.measured_steps, "steps_per_sample": case.steps_per_sample}
    return {**case_figures(case), **sampling}


def _limits(case: CaseResult) -> dict[str, Any]:
    """The measured ceilings the figures were held against (readers flag a figure above them)."""
    generation = case.generation
    flops = case.flops
    limits = {"bandwidth_bytes_per_s": generation.bandwidth_reference_bytes_per_s if generation else None,
              "last_level_cache_bytes": generation.last_level_cache_bytes if generation else None,
              "peak_flops": flops.peak_flops if flops else None,
              # what that peak was (issue 34): what held its clock, why it was busy or re-checked busy
              "peak_limited_by": (", ".join(flops.peak_limited_by) or None) if flops else None,
              "peak_busy": (flops.peak_busy or None) if flops else None,
              "peak_recheck_busy": (flops.peak_recheck_busy or None) if flops else None}
    return {name: _scalar(value) for name, value in limits.items() if value is not None}


#: What a generation case may record about its tokens (issue 28): shared where present, so readers
#: can hold the tokens against the reference (sharing/plausible.py).
TOKEN_FACTS = ("tokens_hash", "tokens_reference_hash", "tokens_match", "tokens_verdict",
               "tokens_first_difference", "tokens_reference_margin")


def _validity(case: CaseResult, selftest: Mapping[str, Any] | None, seed: int = 0) -> dict[str, Any]:
    summary, trend = case.summary(), case.drift() if case.step_times else None
    validity = {"selftest": ("passed" if selftest.get("passed") else "failed") if selftest else "not run",
                "selftest_date": str(selftest.get("date", ""))[:10] if selftest else None,
                # A pass of some groups (--only) says less than a pass of all of them.
                "selftest_groups": [str(g) for g in selftest.get("groups", [])] if selftest else None,
                "noisy": bool(summary.noisy) if summary else None,
                "drift": bool(trend["drifting"]) if trend else None,
                "precision_reached": case.precision_reached(), "stop_reason": case.stop_reason}
    generation = case.generation
    facts = {name: getattr(generation, name) for name in TOKEN_FACTS} if generation else {}
    validity.update({name: _scalar(value) for name, value in facts.items() if value is not None})
    if generation is not None and generation.tokens_hash is not None:
        # The tokens follow from the weights' seed: a reader looks the reference up by it.
        validity["tokens_seed"] = seed
    return validity


def case_id(record: RunRecord, case: CaseResult) -> str:
    """Which case of which run the line is, without saying anything about either: the same case
    shared twice (after a selftest changed its validity, by a newer accelbench) is one result
    (hub compact drops the second as the same machine, run and case)."""
    index = next((i for i, other in enumerate(record.cases) if other is case), -1)
    text = "\0".join((record.run_id, str(index), case.device, key_json(case)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def overall_sections(record: RunRecord) -> dict[int, dict[str, Any]]:
    """The ``overall`` section of each case (by ``id``) whose group has figures across cases:
    the group as the record stores it (``protocol_summary.stored_overall``, never recomputed from
    the shared lines) under its ``group_id``, a digest of the run id, the group's position and its
    label and device, which says which lines are one group without saying which run. Each line of
    the group carries it whole, so a line stays self-contained (a reader counts the group once)."""
    sections: dict[int, dict[str, Any]] = {}
    for position, overall, members in overall_members(record):
        text = "\0".join((record.run_id, str(position), overall.device, overall.label))
        section = {"group_id": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], **overall.to_dict()}
        sections.update({id(case): section for case in members})
    return sections


def _processes(case: CaseResult) -> list[dict[str, Any]]:
    out = []
    for process in case.repeats:
        times = process.step_times
        out.append({"status": process.status, "median_step_s": _scalar(process.median_step_s),
                    "mean_step_s": _scalar(process.mean_step_s),
                    "p10_step_s": process_figure(times) if times else None,
                    "measured_steps": _scalar(process.measured_steps)})
    return out


def _rounded(value: Any) -> Any:
    """Floats to 6 significant digits: far below any figure's noise, a third off every line."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def case_line(record: RunRecord, case: CaseResult, machine_id: str,
              selftest: Mapping[str, Any] | None = None, with_samples: bool = False,
              overall: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The shareable dict of one case (not yet scrubbed or hashed); ``overall``: the section of
    the figures across cases of the case's group (``overall_sections``), where it has one."""
    run = record.options.run_options()
    line: dict[str, Any] = {
        "machine_id": machine_id, "case_id": case_id(record, case),
        "accelbench_version": record.accelbench_version,
        "date": record.created_at[:10], "status": case.status, "rate_unit": case.rate_unit(),
        "key": dict(zip(KEY_FIELDS, comparability_key(case), strict=True)),
        "device": _device(record, case), "limits": _limits(case), "host": _host(record.environment),
        "software": _software(record.environment),
        "settings": {"backend_flags": {str(k): _scalar(v) for k, v in case.backend_flags.items()},
                     "threads": case.threads, "loader_workers": run.workers if run else None,
                     "power": _power(record.environment)},
        "figures": _figures(case),
        "validity": _validity(case, selftest, run.seed if run else 0),
    }
    decode = DecodeDiagnosis.of_case(case)
    if decode is not None:
        # Its bound, host CPU, execution and kernel: readers compare an overhead-bound line only
        # with lines of its host CPU model (compare/decode_diagnosis.py); the floor is in figures.
        line["decode"] = decode.line_section()
    if overall is not None:
        line["overall"] = dict(overall)
    if case.repeats:
        line["processes"] = _processes(case)
    if with_samples and case.ok:
        line["samples"] = ([list(p.step_times) for p in case.repeats] if case.repeats
                           else [list(case.step_times)])
    return _rounded(clean_for_json(line))


def build_bundle(records: Sequence[RunRecord], machine_id: str, selftest: SelftestLookup | None = None,
                 with_samples: bool = False) -> Bundle:
    """Every case of every timing run, each as one scrubbed, hashed line."""
    bundle, salt = Bundle(), privacy.new_salt()
    for record in records:
        if record.kind not in SHARED_KINDS:
            bundle.skipped.append(f"run {record.run_id} is a {record.kind} run: only timing runs "
                                  "(accelbench run) are shared")
            continue
        tokens = privacy.identifying_tokens(record)
        sections = overall_sections(record)
        for case in record.cases:
            if case.skipped:
                continue
            status = selftest(case.device) if selftest else None
            line = privacy.scrub(case_line(record, case, "", status, with_samples, sections.get(id(case))),
                                 tokens, salt)
            # The id is random hex made here: scrubbing it could only hit a token by chance.
            bundle.lines.append(dump_line({**line, "machine_id": machine_id}))
    return bundle
