"""Parity checks find planted faults and name the step; identical randomness makes honest runs pass."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from accelbench import Workload, register
from accelbench.data.synthetic import synthetic_epoch
from accelbench.devices import DeviceSet
from accelbench.options import RunOptions, StopRule
from accelbench.parity.check import CheckOptions, run_check
from accelbench.parity.core import Tolerance, compare_curves, judged_horizon
from accelbench.workloads.base import Noise


def _batch(generator: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(n, 16, generator=generator), torch.randint(0, 4, (n,), generator=generator)


class Planted(Workload):
    description = "planted fault"
    default_batch_size = tiny_batch_size = {"train": 8, "eval": 8}
    dataset_size = tiny_dataset_size = {"train": 64, "eval": 16}

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.05)

    def make_batches(self, mode, batch_size, options):
        return synthetic_epoch(_batch, self.samples_per_epoch(mode), batch_size, options.seed)

    def training_loss(self, model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y)

    def eval_step(self, model, batch):
        return model(batch[0])


class OverflowsInHalf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * 400.0 * (x.abs().sum(1, keepdim=True) * 200.0)  # > 65504 in fp16


class WrongInBf16FromStep5(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 4)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = self.fc(x)
        if x.dtype == torch.bfloat16 and self.calls >= 5:
            out = out * 3  # the planted wrong op
        return out


class NoisyWithDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.drop = nn.Dropout(0.5)
        self.noise = Noise()
        self.out = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(torch.relu(self.fc(x)))
        return self.out(h + self.noise.randn_like(h))


@register
class Overflow(Planted):
    name = "planted-overflow"

    def build_model(self) -> nn.Module:
        return OverflowsInHalf()


@register
class WrongBf16(Planted):
    name = "planted-wrong-bf16"

    def build_model(self) -> nn.Module:
        return WrongInBf16FromStep5()


class WrongInTheFirstRunFromStep5(nn.Module):
    """Right in every run but the first (the candidate trains first): from its 5th step on, that
    run's output is 10% off. The noise-floor runs are right, as a correct device would be."""

    calls = 0  # over every copy of the model: the candidate's steps are calls 1..steps

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        type(self).calls += 1
        out = self.fc(x)
        return out * 1.1 if 5 <= type(self).calls <= 10 else out


@register
class WrongFirstRun(Planted):
    name = "planted-wrong-candidate"

    def build_model(self) -> nn.Module:
        WrongInTheFirstRunFromStep5.calls = 0
        return WrongInTheFirstRunFromStep5()


@register
class Noisy(Planted):
    name = "planted-noisy"

    def build_model(self) -> nn.Module:
        return NoisyWithDropout()


def check(workload: str, precision: str, steps: int = 10, compile_backend: str = "",
          reference: str = "cpu-fp64"):
    run = RunOptions(workloads=(workload,), device="cpu", modes=("train",),
                     stop=StopRule("steps", steps), size="tiny", precisions=(precision,),
                     compile_backends=(compile_backend,), isolation="none")
    record = run_check(CheckOptions(run=run, reference=reference, steps=steps),
                       DeviceSet.current(), ["test"])
    assert len(record.cases) == 1 and record.kind == "check"
    return record.cases[0]


def test_fp16_overflow_is_non_finite_at_step_1_with_the_tensor() -> None:
    case = check("planted-overflow", "fp16")
    parity = case.parity
    assert parity.verdict == "non-finite" and parity.first_bad_step == 1
    assert case.status == "nan" and "step 1" in case.error and parity.bad_tensor


def test_same_model_in_fp32_passes() -> None:
    parity = check("planted-overflow", "fp32", steps=5).parity
    assert parity.verdict == "pass"
    # Nothing diverged, so the noise floor was not needed: every step judged, no floor run.
    assert parity.judged_steps == 5 and parity.noise_floor == []


def test_op_wrong_in_bf16_diverges_at_step_5() -> None:
    case = check("planted-wrong-bf16", "bf16")
    parity = case.parity
    assert parity.verdict == "diverged" and parity.first_bad_step == 5, parity
    assert case.status == "failed" and "step 5" in case.error
    # Loss curves of both sides are kept for the report.
    assert len(parity.candidate) == len(parity.reference) == len(parity.steps) == 10


def test_a_fp32_error_of_ten_percent_is_found_within_the_noise_floor() -> None:
    case = check("planted-wrong-candidate", "fp32")
    parity = case.parity
    assert parity.judged_steps == 10  # this training does not amplify rounding: all steps judged
    assert parity.verdict == "diverged" and 5 <= parity.first_bad_step <= 7, parity
    assert len(parity.noise_floor) == 10


def test_the_cpu_in_fp32_is_not_failed_for_a_training_that_amplifies_rounding() -> None:
    # MNIST's Adadelta at lr 1.0 on synthetic batches: the CPU's own fp32 run left 1e-2 of the
    # fp64 reference at step 33 of 50, and this check called the CPU "diverged" (exit code 1).
    case = check("mnist", "fp32", steps=50)
    parity = case.parity
    assert case.status == "ok" and parity.verdict in ("pass", "drift"), parity
    assert 10 <= parity.judged_steps < 33, parity.judged_steps
    # What the judged window excluded is the amplified rounding, still reported in the curves.
    late = [abs(c - r) / abs(r) for c, r in zip(parity.candidate[33:], parity.reference[33:], strict=True)]
    assert max(late) > 1e-2
    # The floor runs stopped at their departure: the steps after it were not trained (NaN).
    assert len(parity.noise_floor) == 50
    assert all(v is None or math.isnan(v) for v in parity.noise_floor[parity.judged_steps + 1:])
    assert all(v is not None and math.isfinite(v) for v in parity.noise_floor[:parity.judged_steps + 1])


def test_dropout_and_model_noise_are_identical_on_both_sides() -> None:
    parity = check("planted-noisy", "fp32").parity
    assert parity.verdict == "pass", parity
    assert parity.max_rel_loss_diff < 1e-5


def test_compiled_candidate_against_eager_reference() -> None:
    parity = check("planted-noisy", "fp32", steps=4, compile_backend="eager",
                   reference="cpu").parity
    assert parity.verdict == "pass", parity


def test_verdict_rules() -> None:
    tol = Tolerance(1e-3, 1e-2)
    assert compare_curves([1.0, 0.9], [1.0, 0.9], 0.0, tol)["verdict"] == "pass"
    assert compare_curves([1.0, 0.905], [1.0, 0.9], 0.0, tol)["verdict"] == "drift"
    diverged = compare_curves([1.0, 0.9, 2.0], [1.0, 0.9, 0.8], 0.0, tol)
    assert diverged["verdict"] == "diverged" and diverged["first_bad_step"] == 3
    nan = compare_curves([1.0, float("nan")], [1.0, 0.9], None, tol)
    assert nan == {"verdict": "non-finite", "first_bad_step": 2}
    assert compare_curves([1.0], [1.0], 0.5, tol)["verdict"] == "diverged"
    # Only the judged steps count; the output (past them) does not; NaN counts at any step.
    late = compare_curves([1.0, 0.9, 2.0], [1.0, 0.9, 0.8], 0.5, tol, judged=2)
    assert late["verdict"] == "pass" and late["max_rel_loss_diff"] == 0.0
    assert compare_curves([1.0, float("nan")], [1.0, 0.9], None, tol, judged=1)["verdict"] == "non-finite"
    assert compare_curves([1.0, 0.9], [1.0, 0.9], 0.0, tol, judged=0)["verdict"] == "inconclusive"


def test_the_judged_horizon_ends_where_the_noise_floor_leaves_the_pass_tolerance() -> None:
    tol = Tolerance(1e-3, 1e-2)
    reference = [1.0, 1.0, 1.0, 1.0]
    assert judged_horizon([1.0, 1.0005, 1.002, 1.0], reference, tol) == 2
    assert judged_horizon([1.0, float("nan")], reference, tol) == 1
    assert judged_horizon(reference, reference, tol) == 4


def test_check_cli_end_to_end(cli, tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    # Inline: the worker-process path (the default) is tested in test_driver.py.
    proc = cli("check", "mnist", "--device", "cpu", "--size", "tiny", "--steps", "3",
               "--precision", "fp32,bf16", "--isolation", "none", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["kind"] == "check" and data["options"]["reference"] == "cpu-fp64"
    verdicts = {c["precision"]: c["parity"]["verdict"] for c in data["cases"]}
    assert set(verdicts) == {"fp32", "bf16"} and verdicts["fp32"] == "pass"
    assert "pass" in proc.stdout


def test_a_tiny_check_takes_ten_steps_in_a_warm_worker() -> None:
    """Issue 36: ``check mnist --size tiny`` took 70-120 s on a busy 2-CPU machine (50 steps a
    side, a noise floor, a fresh worker per case): a tiny check is as quick as a tiny run, ten
    steps a side (all judged: ``test_check_cli_end_to_end``'s fp32 passes on every one) in the
    warm worker a tiny run uses; a given --steps, and any other size, keep their count."""
    from accelbench.cli import build_parser
    from accelbench.cli.check import options_from_args
    from accelbench.engine.runner import launch_plan
    from accelbench.options.check import DEFAULT_CHECK_STEPS

    def options(*flags: str) -> CheckOptions:
        argv = ["check", "mnist", "--device", "cpu", *flags]
        return options_from_args(build_parser(argv).parse_args(argv))

    tiny = options("--size", "tiny")
    assert tiny.steps == 10 and launch_plan(tiny.run).warm
    assert options("--size", "tiny", "--steps", "30").steps == 30
    published = options()
    assert published.steps == DEFAULT_CHECK_STEPS == 50 and not launch_plan(published.run).warm


@pytest.mark.parametrize("args,needle", [
    (["check", "mnist", "--reference", "gpu"], "--reference"),
    (["check", "mnist", "--precision", "fp8"], "unknown precision 'fp8'"),
    (["check", "mnist", "--steps", "0"], "--steps"),
])
def test_check_bad_usage(inline_cli, args: list[str], needle: str) -> None:
    proc = inline_cli(*args)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("workload", ["transformer-small", "bert-base", "vae"])
def test_transformers_and_the_vae_pass_against_fp64(workload: str) -> None:
    # Hidden dropout is seeded, attention dropout switched off on both sides, VAE noise shared:
    # an honest fp32 candidate must then match the fp64 reference.
    case = check(workload, "fp32", steps=4)
    assert case.parity.verdict == "pass", case.parity
