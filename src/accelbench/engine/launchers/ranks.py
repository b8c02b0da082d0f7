"""The ranks of one case under torchrun: each rank's typed report, the reports collected after
torchrun ended (a rank that left none gets one saying why), and the one rule that makes the case's
result of them.

The rule (:func:`merge_ranks`):

- the step samples are, step by step, the slowest rank's: a global step ends when its last rank
  finishes (every rank times single steps, so the samples pair up); the time and memory figures
  are the largest rank's; the rest is rank 0's (every rank ran the same case and steps);
- the status is the first failed rank's, with that rank named: the others then fail on their
  broken collectives ("connection closed by peer") or are stopped by torchrun;
- the world's figures go to ``result.scale``: per-process throughput = batch / median of those
  slowest steps, global = world size x per-process, and the communication fraction
  ``1 - median(no-sync step) / median(step)``: the share of a step that disappears without the
  gradient all-reduce (reduce-scatter for FSDP), i.e. the communication the backward pass could
  not hide plus the time ranks wait for the slowest one. It is not the total time in collectives
  (overlapped communication costs nothing here), and for FSDP it leaves out the parameter
  all-gathers, which run with or without gradient synchronisation. Noise can make it slightly
  negative at one process.
"""

from __future__ import annotations

import json
import math
import re
import signal
import statistics
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.codec import Codec, FieldCodec
from accelbench.engine.supervise import ChildOutcome, signal_name
from accelbench.results import CaseResult, ScaleFigures, ScaleRank

#: After a successful run, local rank 0 of each node writes every rank's report here (gathered
#: over the process group), so each node's launcher sees the ranks of the other nodes too.
ALL_RANKS_FILE = "all-ranks.json"
#: The last lines of torchrun's output a failed (or warned) case keeps.
TAIL_KEPT = 40
#: Figures whose largest rank is the case's: the world waits for its slowest member.
LARGEST = ("measured_time_s", "input_wait_s", "warmup_time_s", "time_to_first_step_s",
           "peak_memory_bytes", "setup_peak_memory_bytes")


def rank_file(rank: int) -> str:
    return f"rank-{rank}.json"


#: A rank's result travels as a result file's case does.
CASE_RESULT = FieldCodec(lambda result: result.to_dict(), lambda data, _: CaseResult.from_dict(data))


@dataclass
class RankReport(Codec):
    """One rank's outcome: who it was, how it ended, its case result and its no-sync steps."""

    rank: int
    node_rank: int | None = None
    world_size: int | None = None
    host: str | None = None
    device: str | None = None
    status: str = "ok"
    error: str = ""
    #: time.time() when the rank's work ended unsuccessfully: the earliest failure is the cause.
    failed_at: float | None = None
    traceback: str = ""
    #: The training steps timed again with gradient synchronisation off (see the module docstring).
    nosync_step_times: list[float] = field(default_factory=list)
    #: The work's result in this rank; None where the rank left none (killed, crashed early).
    #: Written and read as a result file's case (its own checks, its derived block).
    result: CaseResult | None = field(default=None, metadata={"codec": CASE_RESULT})

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def scale_rank(self) -> ScaleRank:
        """What the case's record keeps of this rank (its traceback stays in its file)."""
        return ScaleRank(rank=self.rank, node_rank=self.node_rank, host=self.host,
                         device=self.device, status=self.status, error=self.error,
                         step_times=list(self.result.step_times) if self.result else [],
                         nosync_step_times=list(self.nosync_step_times))


# torchrun's failure summary: "rank : 1 (local_rank: 1)" then "exitcode : -11 (pid: 42)".
_FAILURE = re.compile(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def collect_ranks(folder: Path, world: int | None, outcome: ChildOutcome) -> list[RankReport]:
    """Every rank's report; ranks that left none get one saying why. ``world`` None (several
    nodes, no gathered file) lists only the ranks whose files are here."""
    gathered = folder / ALL_RANKS_FILE
    if gathered.exists():
        data = json.loads(gathered.read_text())
    else:
        data = [json.loads(path.read_text()) for path in folder.glob("rank-*.json")]
    by_rank = {report.rank: report for report in map(RankReport.from_dict, data)}
    exits = {int(rank): int(code) for rank, code in _FAILURE.findall("\n".join(outcome.output_tail))}
    # SIGTERM is how torchrun stops the other ranks once one has failed: not a failure of its own.
    broken = {rank for rank, code in exits.items() if code != -signal.SIGTERM}
    broken |= {rank for rank, report in by_rank.items() if not report.ok}
    for rank in range(world or 0):
        if rank not in by_rank:
            by_rank[rank] = _missing_rank(rank, outcome, exits.get(rank), bool(broken - {rank}))
    return [by_rank[rank] for rank in sorted(by_rank)]


def _missing_rank(rank: int, outcome: ChildOutcome, exit_code: int | None,
                  other_failed: bool) -> RankReport:
    if outcome.returncode is None:
        status, error = "timeout", "killed at the timeout"
    elif other_failed and exit_code in (None, -signal.SIGTERM):
        status, error = "interrupted", "stopped by torchrun when another rank failed"
    elif exit_code is not None and exit_code < 0:
        status, error = "crashed", f"the process died from {signal_name(-exit_code)}"
    elif exit_code is not None:
        status, error = "crashed", f"the process exited with code {exit_code}"
    else:
        status, error = "crashed", f"left no result (torchrun exited with code {outcome.returncode})"
    return RankReport(rank=rank, status=status, error=error)


def first_failure(reports: list[RankReport]) -> RankReport | None:
    """The root cause: the first rank to fail (a rank torchrun stopped only counts when no rank
    failed of its own)."""
    failed = [report for report in reports if not report.ok]
    return min(failed, key=lambda r: (r.status == "interrupted", r.failed_at or math.inf),
               default=None)


@dataclass(frozen=True)
class Ending:
    """How torchrun ended, and the words a timeout is reported in."""

    outcome: ChildOutcome
    #: e.g. "world size 2 did not finish within --timeout 600 s".
    overran: str


def merge_ranks(skeleton: CaseResult, reports: list[RankReport], ending: Ending,
                figures: ScaleFigures) -> CaseResult:
    """The case's one result from its ranks (the rule in the module docstring); ``skeleton``
    names the case (what a case without a rank's result is recorded on), ``figures`` the world
    (filled in here)."""
    outcome = ending.outcome
    figures.ranks = [report.scale_rank() for report in reports]
    cause = first_failure(reports)
    if outcome.timed_out:
        result = skeleton
        result.status = "timeout"
        result.error = f"{ending.overran}; torchrun and its processes were killed"
    elif cause is not None:
        result = deepcopy(cause.result) if cause.result is not None else skeleton
        result.status, result.error = cause.status, f"rank {cause.rank}: {cause.error}"
    elif not reports or any(report.result is None for report in reports) or (
            outcome.returncode != 0 and len(reports) < figures.world_size):
        last = outcome.last_line()
        result = skeleton
        result.status = "crashed"
        result.error = f"torchrun exited with code {outcome.returncode}" + (f": {last}" if last else "")
    else:
        result = _pooled(reports, figures)
        if outcome.returncode != 0:
            # Every rank finished and wrote its figures; a process then died while tearing down
            # (seen with gloo: SIGABRT in destroy_process_group). The figures stand; say so.
            figures.teardown_warning = (f"torchrun exited with code {outcome.returncode} after "
                                        "every rank had written its result")
            figures.output_tail = outcome.output_tail[-TAIL_KEPT:]
    result.device = skeleton.device  # the case's device, not the one rank 0 took of its kind
    result.scale = figures
    if result.status != "ok":
        figures.output_tail = outcome.output_tail[-TAIL_KEPT:]
    return result


def _slowest(per_rank: list[list[float]]) -> list[float]:
    return [max(times) for times in zip(*per_rank, strict=False)]


def _pooled(reports: list[RankReport], figures: ScaleFigures) -> CaseResult:
    results = [report.result for report in reports if report.result is not None]
    pooled = deepcopy(results[0])
    figures.world_size = reports[0].world_size or figures.world_size
    pooled.step_times = _slowest([result.step_times for result in results])
    for name in LARGEST:
        values = [getattr(result, name) for result in results if getattr(result, name) is not None]
        if values:
            setattr(pooled, name, max(values))
    per_process = pooled.throughput()
    if per_process is None:
        return pooled
    figures.per_process_throughput = per_process
    figures.global_throughput = per_process * figures.world_size
    nosync = _slowest([report.nosync_step_times for report in reports])
    if nosync and pooled.step_times:
        figures.comm_fraction = 1.0 - statistics.median(nosync) / statistics.median(pooled.step_times)
    return pooled
