"""accelbench scale: real torchrun processes over gloo on the CPU, failures, timeouts, usage; the
engine's torchrun launcher under run and check, and scale inline (issue 27: one worker, three
launchers)."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import psutil
import pytest

from accelbench.engine.launchers.ranks import Ending, RankReport, collect_ranks, merge_ranks
from accelbench.engine.launchers.torchrun import torchrun_command
from accelbench.engine.supervise import ChildOutcome
from accelbench.errors import UsageError
from accelbench.options.scale import Rendezvous
from accelbench.results import CaseResult, ScaleFigures
from accelbench.scale.work import fill_efficiency

RANK_FAULTS = '''
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import accelbench
from accelbench.data.synthetic import synthetic_epoch


def _batch(generator, n):
    return torch.randn(n, 8, generator=generator), torch.randint(0, 2, (n,), generator=generator)


class _Base(accelbench.Workload):
    description = "rank 1 misbehaves"
    modes = ("train",)
    default_batch_size = tiny_batch_size = {"train": 16, "eval": 16}
    dataset_size = tiny_dataset_size = {"train": 64, "eval": 64}

    def build_model(self):
        return nn.Linear(8, 2)

    def make_optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.1)

    def make_batches(self, mode, batch_size, options):
        return synthetic_epoch(_batch, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model, batch):
        (Path(os.environ["SCALE_TEST_PIDS"]) / str(os.getpid())).touch()
        if os.environ["RANK"] == "1":
            self.fault()
        x, y = batch
        return F.cross_entropy(model(x), y)


@accelbench.register
class Fails(_Base):
    name = "scale-rank1-fails"

    def fault(self):
        raise RuntimeError("planted failure in rank 1")


@accelbench.register
class Hangs(_Base):
    name = "scale-rank1-hangs"

    def fault(self):
        time.sleep(3600)
'''

CPU = ["--device", "cpu", "--size", "tiny", "--warmup", "1"]


@pytest.fixture
def faulty(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A workload file whose rank 1 fails or hangs; ranks note their pids in a folder."""
    path = tmp_path / "rank_faults.py"
    path.write_text(RANK_FAULTS)
    pids = tmp_path / "pids"
    pids.mkdir()
    return path, {"SCALE_TEST_PIDS": str(pids)}, pids


def test_scale_mnist_over_one_and_two_processes(cli, tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    proc = cli("scale", "mnist", *CPU, "--nproc", "1,2", "--steps", "6", "-o", str(out),
               "--db", str(tmp_path / "h.db"), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(out.read_text())
    assert record["kind"] == "scale"
    cases = record["cases"]
    assert [case["scale"]["world_size"] for case in cases] == [1, 2]
    one, two = (case["scale"] for case in cases)
    for case, scale in zip(cases, (one, two), strict=True):
        assert case["status"] == "ok" and case["mode"] == "train" and case["device"] == "cpu"
        assert case["batch_size"] == 8 and len(case["step_times"]) == 6
        assert scale["backend"] == "gloo" and scale["strategy"] == "ddp"
        assert scale["per_process_throughput"] > 0 and scale["global_throughput"] > 0
        assert scale["per_process_throughput"] == pytest.approx(8 / statistics.median(case["step_times"]))
        assert isinstance(scale["comm_fraction"], float)
        assert [rank["status"] for rank in scale["ranks"]] == ["ok"] * scale["world_size"]
        # fp32 as run has it (no TF32 convolutions on Ampere), cudnn.benchmark on by default
        flags = case["backend_flags"]
        assert flags["cudnn_allow_tf32"] is False and flags["cuda_matmul_allow_tf32"] is False
        assert flags["float32_matmul_precision"] == "highest" and flags["cudnn_benchmark"] is True
    assert two["global_throughput"] == pytest.approx(2 * two["per_process_throughput"])
    assert one["efficiency"] == pytest.approx(1.0)
    assert two["efficiency"] == pytest.approx(two["global_throughput"] / (2 * one["global_throughput"]))
    assert [rank["rank"] for rank in two["ranks"]] == [0, 1]
    # The global step is the slowest rank's.
    slowest = [max(a, b) for a, b in zip(*(r["step_times"] for r in two["ranks"]), strict=True)]
    assert cases[1]["step_times"] == pytest.approx(slowest)
    assert "global samples/s" in proc.stdout and "efficiency" in proc.stdout


def test_fsdp_over_two_processes(cli, tmp_path: Path) -> None:
    out = tmp_path / "fsdp.json"
    proc = cli("scale", "mnist", *CPU, "--nproc", "2", "--steps", "3", "--fsdp", "-o", str(out),
               timeout=120)
    case = json.loads(out.read_text())["cases"][0]
    # FSDP2 runs over gloo on the CPU in torch >= 2.6; where it cannot, that is the status.
    assert case["status"] in ("ok", "unsupported"), case["error"]
    assert case["scale"]["strategy"] == "fsdp"
    assert proc.returncode == (0 if case["status"] == "ok" else 1)


def _dead(pids: Path) -> bool:
    return not any(psutil.pid_exists(int(p.name)) and psutil.Process(int(p.name)).status()
                   != psutil.STATUS_ZOMBIE for p in pids.iterdir())


def test_a_failing_rank_is_reported_not_hung_on(cli, tmp_path: Path, faulty) -> None:
    path, env, pids = faulty
    out = tmp_path / "fail.json"
    start = time.monotonic()
    proc = cli("scale", "scale-rank1-fails", "--workload-file", str(path), *CPU, "--nproc", "2",
               "--steps", "3", "--timeout", "120", "-o", str(out), env=env, timeout=150)
    assert time.monotonic() - start < 90
    assert proc.returncode == 1, proc.stderr
    case = json.loads(out.read_text())["cases"][0]
    assert case["status"] == "failed"
    assert case["error"] == "rank 1: RuntimeError: planted failure in rank 1"
    ranks = case["scale"]["ranks"]
    assert [rank["rank"] for rank in ranks] == [0, 1]
    assert ranks[1]["status"] == "failed" and "planted failure" in ranks[1]["error"]
    assert ranks[0]["status"] != "ok"  # stopped, or failed on its broken all-reduce
    assert _dead(pids)


def test_a_hanging_rank_is_killed_at_the_timeout(cli, tmp_path: Path, faulty) -> None:
    path, env, pids = faulty
    out = tmp_path / "hang.json"
    start = time.monotonic()
    proc = cli("scale", "scale-rank1-hangs", "--workload-file", str(path), *CPU, "--nproc", "2",
               "--steps", "3", "--timeout", "20", "-o", str(out), env=env, timeout=150)
    assert time.monotonic() - start < 60
    assert proc.returncode == 1, proc.stderr
    case = json.loads(out.read_text())["cases"][0]
    assert case["status"] == "timeout" and "--timeout 20 s" in case["error"]
    assert any(pids.iterdir()), "the ranks never started a step"
    assert _dead(pids), "a rank survived the timeout"


@pytest.mark.parametrize(("args", "words"), [
    (["--nproc", "0"], "positive"),
    (["--nproc", "1,a"], "'a' is not a whole number"),
    (["--device", "cuda"], "not available"),
    (["--device", "cpu", "--backend", "nccl"], "nccl backend does not handle cpu"),
    # an index would be ignored (ranks take device 0..N-1): refused, naming what is allowed
    (["--device", "cuda:3"], "without an index (allowed: cpu, cuda, xpu, auto)"),
    (["--device", "xpu:1", "--nproc", "1"], "without an index"),
    (["--device", "cpu:0"], "without an index"),
])
def test_bad_usage_is_one_line_and_exit_2(inline_cli, args: list[str], words: str) -> None:
    proc = inline_cli("scale", "mnist", "--size", "tiny", *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelbench: error:") and words in lines[0]


# --- the pieces, without processes ---------------------------------------------------------------
def test_a_device_index_is_refused_before_any_device_is_looked_at(monkeypatch) -> None:
    """``scale --device cuda:3`` once ran on cuda:0..N-1: on a machine with 4 GPUs, the index is
    refused before the devices are even listed (no GPU needed to see it)."""
    from fakes import fake_cuda_torch

    from accelbench.devices import DeviceSet, discover
    from accelbench.options.scale import ScaleOptions
    from accelbench.scale import work
    from accelbench.scale.work import run_scale

    def launched(*args: object, **kwargs: object) -> None:
        raise AssertionError("torchrun was started: its ranks would run on cuda:0 and cuda:1")

    four_gpus = DeviceSet(discover(fake_cuda_torch(4)))
    assert len(four_gpus.select("cuda:3")) == 1  # the index names a real device here
    monkeypatch.setattr(DeviceSet, "current", classmethod(lambda cls: four_gpus))
    monkeypatch.setattr(work, "drive", launched)
    monkeypatch.setattr(work, "new_record", lambda *args: work.RunRecord(
        run_id="x", created_at="", accelbench_version="", command=[], environment={}))
    with pytest.raises(UsageError, match="'cuda:3': scale takes a device kind without an index"):
        run_scale(ScaleOptions.of("mnist", (2,), device="cuda:3"), ["accelbench"])
    assert ScaleOptions.of("mnist", (2,), device="cuda").run.device == "cuda"



def test_multi_node_options_reach_torchrun_unchanged(tmp_path: Path) -> None:
    rendezvous = Rendezvous(nnodes=2, node_rank=1, endpoint="node0.example:29400",
                            backend="c10d", id="job-42")
    command = torchrun_command(4, rendezvous.torchrun_args(), tmp_path / "spec.json")
    assert command[1:5] == ["-m", "torch.distributed.run", "--nproc-per-node", "4"]
    text = " ".join(command)
    for option in ("--nnodes 2", "--node-rank 1", "--rdzv-endpoint node0.example:29400",
                   "--rdzv-backend c10d", "--rdzv-id job-42"):
        assert option in text
    assert "--standalone" not in command
    assert command[-4:] == ["-m", "accelbench.engine.launchers.worker", "--rank",
                            str(tmp_path / "spec.json")]
    single = torchrun_command(2, Rendezvous().torchrun_args(), tmp_path / "spec.json")
    assert "--standalone" in single and "--nnodes" not in single
    with pytest.raises(UsageError, match="--rdzv-endpoint"):
        Rendezvous(nnodes=2)


def _case(world: int) -> CaseResult:
    return CaseResult(workload="w", mode="train", device="cpu", batch_size=4,
                      scale=ScaleFigures(world_size=world))


def _write(folder: Path, report: dict) -> None:
    (folder / f"rank-{report['rank']}.json").write_text(json.dumps(report))


def test_first_failing_rank_is_the_cause_and_silent_ranks_are_explained(tmp_path: Path) -> None:
    _write(tmp_path, {"rank": 0, "status": "failed", "error": "RuntimeError: Connection closed by peer",
                      "failed_at": 200.0})
    _write(tmp_path, {"rank": 1, "status": "oom", "error": "OutOfMemoryError: boom",
                      "failed_at": 100.0, "result": _case(5).to_dict()})
    summary = ["[1]:", "  time      : 2026-01-01_00:00:00", "  host      : h",
               "  rank      : 2 (local_rank: 2)", "  exitcode  : -11 (pid: 7) SIGSEGV",
               "[2]:", "  time      : 2026-01-01_00:00:00", "  host      : h",
               "  rank      : 3 (local_rank: 3)", "  exitcode  : -15 (pid: 8) SIGTERM"]
    outcome = ChildOutcome(1, summary)
    ranks = collect_ranks(tmp_path, 5, outcome)
    assert [r.status for r in ranks] == ["failed", "oom", "crashed", "interrupted", "interrupted"]
    assert ranks[2].error == "the process died from SIGSEGV"
    assert ranks[3].error == "stopped by torchrun when another rank failed"
    case = merge_ranks(_case(5), ranks, Ending(outcome, "overran"), ScaleFigures(world_size=5))
    assert (case.status, case.error) == ("oom", "rank 1: OutOfMemoryError: boom")
    assert case.scale.output_tail == summary
    assert [rank.status for rank in case.scale.ranks] == [r.status for r in ranks]
    assert case.scale.ranks[2].host is None  # a rank that left no report


def test_efficiency_against_the_smallest_world_size() -> None:
    cases = [_case(2), _case(4), _case(8)]
    for case, rate in zip(cases, (100.0, 180.0, None), strict=True):
        case.scale.global_throughput = rate
    fill_efficiency(cases)
    assert cases[0].scale.efficiency == pytest.approx(1.0)
    assert cases[1].scale.efficiency == pytest.approx(180.0 / 200.0)
    assert cases[2].scale.efficiency is None  # failed: no figure


def test_process_counts() -> None:
    import argparse

    from accelbench.cli.scale import process_counts

    assert process_counts("1,2, 4,2") == (1, 2, 4)
    for bad in ("0", "a", "1,,2", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            process_counts(bad)


def test_environment_of_the_ranks_names_this_accelbench() -> None:
    from accelbench.engine.launchers.torchrun import rank_environment

    env = rank_environment(3)
    assert env["OMP_NUM_THREADS"] == "3"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(Path(__file__).resolve().parents[2] / "src")


def _rank(rank: int, steps: list[float], nosync: list[float]) -> RankReport:
    result = CaseResult(workload="w", mode="train", device=f"cuda:{rank}", batch_size=4,
                        step_times=steps, measured_steps=len(steps), warmup_steps=1,
                        measured_time_s=sum(steps), peak_memory_bytes=100 * (rank + 1))
    return RankReport(rank=rank, world_size=2, device=f"cuda:{rank}", result=result,
                      nosync_step_times=nosync)


def test_ranks_merge_into_one_case_by_the_slowest_rank_per_step() -> None:
    """Issue 27: a rank's result is a typed CaseResult; the case is the slowest rank at each
    step, the largest rank's memory and time, rank 0's counts, the case's own device."""
    ranks = [_rank(0, [0.1, 0.3, 0.2], [0.05, 0.05, 0.05]), _rank(1, [0.2, 0.1, 0.2], [0.1, 0.1, 0.1])]
    skeleton = CaseResult(workload="w", mode="train", device="cuda:0", batch_size=4)
    case = merge_ranks(skeleton, ranks, Ending(ChildOutcome(0, []), ""), ScaleFigures(world_size=2))
    assert case.status == "ok" and case.device == "cuda:0"
    assert case.step_times == [0.2, 0.3, 0.2] and case.measured_steps == 3
    assert case.peak_memory_bytes == 200 and case.measured_time_s == pytest.approx(0.6)
    scale = case.scale
    assert scale.per_process_throughput == pytest.approx(4 / 0.2)
    assert scale.global_throughput == pytest.approx(2 * 4 / 0.2)
    assert scale.comm_fraction == pytest.approx(1 - 0.1 / 0.2)
    assert [r.device for r in scale.ranks] == ["cuda:0", "cuda:1"]
    assert scale.ranks[1].step_times == [0.2, 0.1, 0.2] and scale.ranks[1].nosync_step_times == [0.1] * 3


def test_a_crash_in_teardown_after_every_rank_reported_keeps_the_figures() -> None:
    ranks = [_rank(r, [0.1, 0.1], [0.08, 0.08]) for r in (0, 1)]
    outcome = ChildOutcome(1, ["failed (exitcode: -6) local_rank: 1"])
    case = merge_ranks(_case(2), ranks, Ending(outcome, ""), ScaleFigures(world_size=2))
    assert case.status == "ok" and case.step_times == [0.1, 0.1]
    assert "after every rank had written its result" in case.scale.teardown_warning
    missing = merge_ranks(_case(2), ranks[:1], Ending(outcome, ""), ScaleFigures(world_size=2))
    assert missing.status == "crashed" and "torchrun exited with code 1" in missing.error
