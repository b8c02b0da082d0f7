"""RunOptions from the values a user gives: the one path for CLI flags and Python keywords.

``accelbench run --target-ci 1 --auto-batch`` and ``accelbench.run(target_ci=1, auto_batch=True)``
both come here with the same keywords (a flag's keyword is its name with ``_`` for ``-``), so they
accept the same values, fill the same defaults and reject bad input with the same message: the
checks themselves live in RunOptions and StopRule, which validate when built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from accelbench.bounds import MOST_SECONDS, check_number
from accelbench.devices.compilation import CompileSpec
from accelbench.errors import UsageError
from accelbench.measure.loop.stop import DEFAULT_SUSTAINED_INTERVAL_S, DEFAULT_TIME_BUDGET_S, StopRule
from accelbench.options import TINY_TARGET_CI_PCT, TINY_TIME_BUDGET_S, RunOptions
from accelbench.options.declared import DEFAULTS
from accelbench.workloads import suites
from accelbench.workloads.presets import GENERATE
from accelbench.workloads.protocols import protocol

if TYPE_CHECKING:
    from typing_extensions import Unpack

PathLike = str | Path


class MeasureKeywords(TypedDict, total=False):
    """How each case is measured: keywords of ``run``, ``sweep`` and ``bench`` alike."""

    steps: int | None  # --steps: exactly N steps after warm-up
    time_budget: float | None  # --time-budget (default 10 s)
    epochs: int | None  # --epochs: N full epochs
    target_ci: float | None  # --target-ci: stop a time budget once the CI is this tight (%)
    sustained: float | None  # --sustained: minutes of sustained work after warm-up (burst vs held)
    sustained_interval: float | None  # --sustained-interval: seconds per interval (default 10)
    warmup: int  # --warmup
    precision: str | Sequence[str]  # --precision: a name, "fp32,bf16" or a list
    compile: bool | str | Sequence[str] | None  # --compile: True = inductor; a list runs each
    channels_last: bool  # --channels-last
    threads: int | None  # --threads
    isolation: str | None  # --isolation process|none (left out: process, warm at --size tiny)
    case_timeout: float  # --case-timeout
    cooldown: float  # --cooldown
    repeat: int  # --repeat
    cudnn_benchmark: bool  # --no-cudnn-benchmark is cudnn_benchmark=False (default True)


class DataKeywords(TypedDict, total=False):
    """What a named workload is built from: keywords of ``run`` and ``sweep``."""

    workload_file: PathLike | Sequence[PathLike] | None  # --workload-file (one or a list)
    size: str  # --size published|tiny
    data: str  # --data synthetic|synthetic-device|real
    data_dir: PathLike | None  # --data-dir
    workers: int  # --workers


class SweepKeywords(MeasureKeywords, DataKeywords, total=False):
    """``accelbench sweep``'s options besides the batch sizes."""

    stream: bool  # --stream: --mode generate reads each token to the host as it is made
    protocol: str | None  # --protocol: llama-bench, gpt-fast or mlperf-client (generation)


class RunKeywords(SweepKeywords, total=False):
    """Every option of ``accelbench run``, as ``accelbench.run`` keywords: their types for static
    checks of ``**keywords``, held to options/declared.py by tests/options/test_options.py."""

    suite: str | None  # --suite quick|full
    batch_size: int | None  # --batch-size
    prompt_len: int | str | Sequence[int] | None  # --prompt-len: generation prompts, "128,512"
    new_tokens: int | str | Sequence[int] | None  # --new-tokens: generated tokens per case
    auto_batch: bool  # --auto-batch
    profile: bool  # --profile
    nproc: int  # --nproc: ranks per case under --isolation torchrun


class BenchKeywords(MeasureKeywords, total=False):
    """``accelbench.bench``'s options that ``run`` shares (its batch and data come with the model)."""

    auto_batch: bool
    profile: bool


def keyword_names(kind: type) -> tuple[str, ...]:
    """The keywords a TypedDict above declares (with those it inherits)."""
    keys = kind.__required_keys__ | kind.__optional_keys__  # type: ignore[attr-defined]  # a TypedDict class
    return tuple(sorted(keys))


def reject_unknown(function: str, given: Mapping[str, Any], kind: type) -> None:
    """A keyword ``function`` does not take is a usage error naming what it does take."""
    allowed = keyword_names(kind)
    unknown = [name for name in given if name not in allowed]
    if unknown:
        raise UsageError(f"{function}() has no option {unknown[0]!r}; allowed: {', '.join(allowed)}")


def names(value: str | Sequence[str], flag: str) -> tuple[str, ...]:
    """``"a,b"``, ``"a"`` or ``["a", "b"]`` -> ``("a", "b")``, as a comma list on the CLI."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, Sequence) or not all(isinstance(item, str) for item in items):
        raise UsageError(f"{flag} takes a name, a comma list or a list of names; got {value!r}")
    return tuple(item.strip() for item in items if item.strip())


def lengths(value: int | str | Sequence[int] | None, flag: str) -> tuple[int, ...]:
    """``"128,512"``, ``512`` or ``[128, 512]`` -> ``(128, 512)``; None -> ``()`` (the default)."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else [value] if isinstance(value, int) \
        else value
    found = []
    for item in items:
        try:
            found.append(int(str(item).strip()))
        except ValueError:
            raise UsageError(f"{flag} takes whole numbers or a comma list of them; got {value!r}") \
                from None
    return tuple(found)


def compile_backends(value: bool | str | Sequence[str] | None) -> tuple[str, ...]:
    """None/False = not compiled (""), True = inductor (a bare ``--compile``), else the named
    back ends, each with an optional torch.compile mode (``inductor:reduce-overhead``: CUDA
    graphs), "none" meaning not compiled (``--compile inductor,none`` runs both)."""
    if value is None or value is False:
        return ("",)
    if value is True:
        return ("inductor",)
    # "inductor:reduce-overhead": a back end and torch.compile's mode, checked and normalised
    # ("inductor:default" is "inductor") by the torch-free spec.
    chosen = [CompileSpec.parse(name).text for name in names(value, "--compile")]
    return tuple(dict.fromkeys(chosen))


def recipe_compile(value: bool | str | Sequence[str] | None, protocol_name: str | None
                   ) -> bool | str | Sequence[str] | None:
    """``--compile`` as given, or where it is not given the --protocol's execution recipe (gpt-fast:
    ``inductor:reduce-overhead``, its compiled decode step with CUDA graphs)."""
    if value is not None or not protocol_name:
        return value
    return protocol(protocol_name).compile or None


def stop_rule(steps: int | None = None, time_budget: float | None = None,
              epochs: int | None = None, target_ci: float | None = None,
              sustained: float | None = None, sustained_interval: float | None = None) -> StopRule:
    """At most one of steps, time_budget, epochs and sustained (minutes); none = the default
    time budget."""
    given = [(kind, flag, value) for kind, flag, value in (
        ("steps", "--steps", steps), ("time", "--time-budget", time_budget),
        ("epochs", "--epochs", epochs), ("sustained", "--sustained", sustained))
        if value is not None]
    if len(given) > 1:
        raise UsageError(f"{given[1][1]} is not allowed with {given[0][1]}: give one of --steps, "
                         "--time-budget, --epochs and --sustained")
    if sustained_interval is not None and sustained is None:
        raise UsageError("--sustained-interval needs --sustained MINUTES: it is the length of a "
                         "sustained run's intervals")
    kind, _, value = given[0] if given else ("time", "", DEFAULT_TIME_BUDGET_S)
    if kind == "sustained":
        check_number("--sustained", value, whole=False, zero_ok=False, most=MOST_SECONDS / 60)
        interval = DEFAULT_SUSTAINED_INTERVAL_S if sustained_interval is None else sustained_interval
        return StopRule(kind, value * 60, target_ci, interval)
    return StopRule(kind, value, target_ci)


def size_stop_rule(size: str, given: StopRule, stop_given: bool, target_ci: float | None) -> StopRule:
    """The stop rule of a run at ``size``: what the user gave (``stop_given``: --steps,
    --time-budget, --epochs or --sustained), else at --size tiny the tiny budget, with the user's
    --target-ci where given."""
    if size != "tiny" or stop_given:
        return given
    return StopRule("time", TINY_TIME_BUDGET_S,
                    TINY_TARGET_CI_PCT if target_ci is None else target_ci)


def resolve_isolation(isolation: str | None, size: str, repeat: int) -> tuple[str, bool]:
    """(isolation, warm worker): a given --isolation stands as given, each case in a fresh worker
    process or inline; left out, it is "process", and at --size tiny with one process a case the
    cases share a warm worker (start-up paid once per device, each case begun fresh)."""
    if isolation is not None:
        return isolation, False
    return "process", size == "tiny" and repeat == 1


def _paths(value: PathLike | Sequence[PathLike] | None) -> tuple[Path, ...]:
    if value is None:
        return ()
    return (Path(value),) if isinstance(value, (str, Path)) else tuple(Path(p) for p in value)


def select_workloads(patterns: str | Sequence[str] | None, suite: str | None,
                     workload_files: Sequence[Path]) -> tuple[tuple[str, ...], bool]:
    """(workload names, whether they were named): names or wildcards, else the workloads the
    files register, else the suite (default: the quick one). Loads the files. Names are checked
    against the registry without importing torch; only a model name (``timm:...``), which its
    library resolves, and a workload file, which is Python, load more."""
    from accelbench.workloads import registry
    from accelbench.workloads.suites import DEFAULT_SUITE, suite_workloads

    chosen = names(patterns or (), "workloads")
    if chosen and suite:
        raise UsageError("give workload names or --suite, not both")
    from_files = _load_files(workload_files)
    if chosen:
        return tuple(registry.match(chosen, _match_models)), True
    if from_files:
        return tuple(from_files), True
    return suite_workloads(suite or DEFAULT_SUITE), False


def _match_models(pattern: str) -> list[str]:
    # The catalogue imports torch: only a model name (timm:...) needs it.
    from accelbench.workloads.catalogue import match_models

    return match_models(pattern)


def _load_files(workload_files: Sequence[Path]) -> list[str]:
    """The names the workload files register (loading them runs the user's Python)."""
    if not workload_files:
        return []
    from accelbench.workloads.catalogue import load_workload_file

    return [name for path in workload_files for name in load_workload_file(path)]


def build_run_options(workloads: str | Sequence[str] | None, device: str | None,
                      modes: str | Sequence[str], **keywords: Unpack[RunKeywords]) -> RunOptions:
    """Validated RunOptions from CLI-spelled values; ``device=None`` is ``auto`` for named
    workloads and ``all`` for a suite, as ``accelbench run`` does."""
    reject_unknown("run", keywords, RunKeywords)
    values: dict[str, Any] = {**DEFAULTS, **keywords}
    files = _paths(values["workload_file"])
    # The stop rule first: it needs no workload, and resolving workloads imports torch.
    stop = stop_rule(values["steps"], values["time_budget"], values["epochs"], values["target_ci"],
                     values["sustained"], values["sustained_interval"])
    stop = size_stop_rule(values["size"], stop, any(values[name] is not None for name in (
        "steps", "time_budget", "epochs", "sustained")), values["target_ci"])
    isolation, warm = resolve_isolation(values["isolation"], values["size"], values["repeat"])
    chosen, named = select_workloads(workloads, values["suite"], files)
    suite = None if named else values["suite"] or suites.DEFAULT_SUITE
    chosen_modes = names(modes, "--mode")
    refuse_idle_lengths(values, chosen, chosen_modes, suite, stop)
    data_dir = values["data_dir"]
    return RunOptions(
        workloads=chosen, device=device or ("auto" if named else "all"), modes=chosen_modes,
        suite=suite,
        stop=stop,
        warmup_steps=values["warmup"], batch_size=values["batch_size"], threads=values["threads"],
        data=values["data"], data_dir=Path(data_dir) if data_dir is not None else None,
        size=values["size"], workers=values["workers"], precisions=names(values["precision"], "--precision"),
        compile_backends=compile_backends(recipe_compile(values["compile"], values["protocol"])),
        channels_last=values["channels_last"],
        workload_files=tuple(str(path.resolve()) for path in files),
        isolation=isolation, warm_worker=warm, nproc=values["nproc"],
        case_timeout=values["case_timeout"],
        auto_batch=values["auto_batch"], cooldown=values["cooldown"], repeat=values["repeat"],
        profile=values["profile"], cudnn_benchmark=values["cudnn_benchmark"], stream=values["stream"],
        protocol=values["protocol"] or "",
        stop_given=any(values[n] is not None for n in ("steps", "time_budget", "epochs", "target_ci")),
        prompt_lens=lengths(values["prompt_len"], "--prompt-len"),
        new_tokens=lengths(values["new_tokens"], "--new-tokens"),
    )


def refuse_idle_lengths(values: Mapping[str, Any], workloads: Sequence[str], modes: Sequence[str],
                        suite: str | None, stop: StopRule) -> None:
    """--prompt-len and --new-tokens set generation cases: given where the modes (with what a
    suite adds) make none, they would be ignored, so they are refused. Here, in the one function
    run, check, sweep and the Python API build their options with."""
    given = [flag for flag, name in (("--prompt-len", "prompt_len"), ("--new-tokens", "new_tokens"))
             if values.get(name) is not None]
    if not given:
        return
    sustained = stop.kind == "sustained"
    if any(GENERATE in suites.suite_modes(suite, name, tuple(modes), sustained=sustained)
           for name in workloads):
        return
    both = len(given) > 1
    raise UsageError(f"{' and '.join(given)} {'go' if both else 'goes'} with --mode generate: "
                     f"--mode {','.join(modes)} makes no generation case; add generate to --mode "
                     f"or leave {'them' if both else 'it'} out")


def check_data(options: RunOptions) -> None:
    """Fail before any case runs when a workload cannot get the data ``options`` ask for (a
    missing data set file, a data kind it has no loader for)."""
    from accelbench.data.options import DataOptions
    from accelbench.data.placement import source_kind
    from accelbench.workloads import get_workload_class

    data = DataOptions(kind=source_kind(options.data), data_dir=options.data_dir)
    for name in options.workloads:
        workload = get_workload_class(name)(options.size)
        for mode in options.modes:
            if mode in workload.modes:
                workload.check_data(mode, data)


def load_workload_files(options: RunOptions) -> RunOptions:
    """RunOptions made by hand name their workload files; load them here as build_run_options
    does, so their workloads are registered in this process."""
    from accelbench.workloads.catalogue import load_workload_file

    for path in options.workload_files:
        load_workload_file(Path(path))
    return options
