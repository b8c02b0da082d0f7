"""``accelbench run`` as a library call: its per-case work (measure the case, halving the batch
after out-of-memory with --auto-batch) through the driver, inline, in worker processes or (with
``--isolation torchrun``) as ``--nproc`` ranks under torchrun, as ``launchers/choose.py`` picks
from the options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from accelbench.devices import DeviceSet
from accelbench.engine.case import Case, CaseProgress, new_record, prepare_worker, skeleton_result
from accelbench.engine.cold_start import CaseStart
from accelbench.engine.driver import Interrupted as Interrupted  # re-exported: callers catch it here
from accelbench.engine.driver import Terminated as Terminated
from accelbench.engine.driver import drive
from accelbench.engine.launchers.backends import check_worlds
from accelbench.engine.launchers.base import Launcher, Report
from accelbench.engine.launchers.choose import LaunchPlan
from accelbench.engine.launchers.torchrun import World
from accelbench.engine.measure_case import run_case
from accelbench.engine.spec import CaseSpec, RankPlan, model_files_for
from accelbench.engine.work import CaseWork
from accelbench.measure.loop.step_loop import Progress
from accelbench.options import RunOptions
from accelbench.results import CaseResult, RunRecord
from accelbench.results.pairs import attach_break_evens


class RunWork(CaseWork[Case]):
    """``run``'s per-case work: measure the case; with --auto-batch, halve the batch after
    out-of-memory until it fits (as timm's benchmark does), each try in a fresh launch."""

    worker = "accelbench.engine.runner:run_from_spec"

    def __init__(self, options: RunOptions) -> None:
        self.options = options

    def label(self, case: Case) -> str:
        return case.label

    def skeleton(self, case: Case) -> CaseResult:
        return skeleton_result(case, self.options)

    def inline(self, case: Case, progress: Progress | None) -> CaseResult:
        return measure_from_start(case, self.options, progress)

    def spec(self, case: Case) -> CaseSpec:
        return CaseSpec(self.worker, self.options, case, model_files=model_files_for(case.workload))

    def world(self, case: Case) -> World:
        return World.on_one_node(self.options.nproc, case.device, self.options.threads)

    def next_round(self, case: Case, first: CaseResult) -> Case:
        # Later rounds use the batch the first one settled on (--auto-batch may have halved it).
        return replace(case, batch_size=first.batch_size)

    def launch(self, launcher: Launcher, case: Case, progress: Progress | None) -> CaseResult:
        failed_batches: list[int] = []
        while True:
            result = super().launch(launcher, case, progress)
            if result.status != "oom" or not self.options.auto_batch or case.batch_size == 1:
                break
            failed_batches.append(case.batch_size)
            case = replace(case, batch_size=max(1, case.batch_size // 2))
        if failed_batches:
            result.oom_batch_sizes = failed_batches
        return result


def launch_plan(options: RunOptions) -> LaunchPlan:
    """How ``run``'s cases are launched: as the options ask, a sustained run's minutes on top of
    the set-up time the timeout allows for, and a warm worker where the options share one (never
    with --repeat: every repeat is a process of its own, what compare holds as independent)."""
    return LaunchPlan.of_run(options, warm=options.warm_worker and options.repeat == 1)


def run_with_auto_batch(case: Case, options: RunOptions, progress: Progress | None) -> CaseResult:
    """One case through its launcher (benchmarks/ measure the isolation path with it)."""
    from accelbench.engine.launchers.choose import one_launcher

    return RunWork(options).launch(one_launcher(LaunchPlan.of_run(options)), case, progress)


def run_from_spec(spec: CaseSpec, report: Report) -> CaseResult:
    """The worker's (or a rank's) side of RunWork."""
    options = spec.run_options()
    prepare_worker(options)
    return measure_from_start(spec.the_case(), options, report.progress, spec.rank)


def measure_from_start(case: Case, options: RunOptions, progress: Progress | None,
                       rank: RankPlan | None = None) -> CaseResult:
    """Measure one case in this process (as a torchrun rank where ``rank`` says so), a compiled
    one into fresh compile caches, and record how it began (the first case of its process or a
    warm one; the caches: engine/cold_start.py)."""
    with CaseStart(compiled=bool(case.compile_backend)) as start:
        result = run_case(case, options, progress, rank)
    result.start = start.record
    return result


def run_plan(options: RunOptions, devices: DeviceSet, cases: list[Case], command: list[str],
             progress: CaseProgress | None = None,
             on_case: Callable[[RunRecord], None] | None = None, live: bool = False) -> RunRecord:
    """Run every case (``options.repeat`` times, in interleaved rounds) through the driver; the
    record is complete even when cases fail.

    ``on_case`` is called with the record after each case process (to save it as it grows).
    SIGINT and SIGTERM raise Interrupted carrying the record; ``live`` shows the progress
    display (see ``engine.driver.drive``).
    """
    if options.threads:
        torch.set_num_threads(options.threads)
    check_worlds(options, devices, (case.device for case in cases))
    record = new_record(options, devices, command)
    case_progress = None
    if progress is not None:
        def case_progress(index: int, phase: str, done: float, total: float | None) -> None:
            progress(cases[index], phase, done, total)
    def finished(part: RunRecord) -> None:
        # A compiled case beside the same work uncompiled: when compiling pays off, as cases end.
        attach_break_evens(part.cases)
        if on_case is not None:
            on_case(part)

    done = drive(RunWork(options), cases, record, launch=launch_plan(options),
                 progress=case_progress, on_case=finished, repeat=options.repeat,
                 cooldown=options.cooldown, live=live)
    attach_break_evens(done.cases)
    return done
