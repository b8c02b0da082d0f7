"""Batch-size sweeps: the list syntax, saturation and crossover on recorded curves, OOM semantics,
and real sweeps (CLI in worker processes, a bench model from Python) with table, figure, report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from torch import nn

import accelbench
from accelbench.errors import UsageError
from accelbench.render.figures import sweep_figure
from accelbench.render.sweep_table import figure_lines, summary_lines, sweep_rows
from accelbench.results import CaseResult, RunRecord
from accelbench.sweeps.analysis import crossovers, curves, parse_batch_sizes


@pytest.mark.parametrize("text, expected", [
    ("1,4,16", (1, 4, 16)),
    ("16, 1,4,4", (1, 4, 16)),
    ("1,2,4,...,64", (1, 2, 4, 8, 16, 32, 64)),
    ("1,2,...,100", (1, 2, 4, 8, 16, 32, 64, 100)),
    ("8,12,...,24", (8, 12, 16, 20, 24)),
])
def test_batch_size_lists(text: str, expected: tuple[int, ...]) -> None:
    assert parse_batch_sizes(text) == expected


@pytest.mark.parametrize("text", ["", "0,4", "a,b", "1,...,8", "4,2,...,16", "1,2,...", "1," * 70 + "1000"])
def test_bad_batch_size_lists(text: str) -> None:
    if text.startswith("1,1,"):
        text = ",".join(str(i) for i in range(1, 80))
    with pytest.raises(UsageError, match="--batch-size"):
        parse_batch_sizes(text)


def _case(device: str, batch: int, step_s: float, status: str = "ok", spread: float = 0.01) -> CaseResult:
    """A recorded case: seven step times around ``step_s`` (so its throughput is batch / step_s)."""
    times = [step_s * (1 + spread * k) for k in (-3, -2, -1, 0, 1, 2, 3)] if status == "ok" else []
    return CaseResult(workload="mnist", mode="train", device=device, batch_size=batch, status=status,
                      step_times=times, error="" if status == "ok" else "out of memory")


def _record(cases: list[CaseResult]) -> RunRecord:
    return RunRecord(run_id="s1", created_at="2026-11-23T00:00:00+00:00", accelbench_version="0",
                     cases=cases, kind="sweep")


def test_saturation_is_the_smallest_batch_within_5_percent_of_the_best() -> None:
    # CPU: 100, 380, 960, 1000, 1010 samples/s -> batch 16 is 95% of the best (1010 at 64).
    cpu = [_case("cpu", b, b / rate) for b, rate in ((1, 100), (4, 380), (16, 960), (32, 1000), (64, 1010))]
    (curve,) = curves(_record(cpu))
    assert curve.saturated and curve.saturation.batch_size == 16 and curve.best.batch_size == 64
    assert "saturates at batch 16" in curve.describe()


def test_a_still_rising_curve_is_not_saturated_and_oom_is_named() -> None:
    cases = [_case("cuda", 1, 1 / 10), _case("cuda", 4, 4 / 50), _case("cuda", 16, 16 / 400),
             _case("cuda", 64, 64, status="oom")]
    (curve,) = curves(_record(cases))
    assert not curve.saturated and curve.oom_batch == 64
    assert curve.describe().startswith("mnist train on cuda: not saturated by batch 16")
    assert "out of memory from batch 64" in curve.describe()
    assert [row[4] for row in sweep_rows(_record(cases))][-1] == "OOM"


def test_crossover_is_where_the_accelerator_stays_faster() -> None:
    cpu = [_case("cpu", b, b / r) for b, r in ((1, 1000), (4, 2000), (16, 3000), (64, 3200))]
    # MPS: launch-bound at small batches (slower), faster from 16 on.
    mps = [_case("mps", b, b / r) for b, r in ((1, 200), (4, 1500), (16, 6000), (64, 20000))]
    lines = crossovers(curves(_record(cpu + mps)))
    assert lines == ["mnist train: mps vs cpu: crossover at batch 16; mps is faster from there on"]
    # Overlapping intervals are not "faster": a 1% lead inside 30% noise is no crossover.
    noisy = [_case("mps", b, b / (r * 1.01), spread=0.1) for b, r in ((1, 1000), (4, 2000))]
    noisy_cpu = [_case("cpu", b, b / r, spread=0.1) for b, r in ((1, 1000), (4, 2000))]
    assert "as fast or faster at every batch" in crossovers(curves(_record(noisy_cpu + noisy)))[0]


def test_the_figure_draws_each_curve() -> None:
    cpu = [_case("cpu", b, b / r) for b, r in ((1, 100), (4, 380), (16, 960), (64, 1000))]
    lines = figure_lines(_record(cpu))
    points = [(c.batch_size, c.throughput(), c.throughput_ci()) for c in cpu]
    assert lines == [("mnist train cpu", points, 16)]
    png = sweep_figure(lines, "test")
    assert png is not None and png.startswith(b"\x89PNG")
    assert sweep_figure([("empty", [], None)], "nothing") is None


def test_out_of_memory_stops_larger_batches_on_that_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model that fails as an allocator does above 8 rows: 16 is 'oom', 32 is not even run."""

    class Greedy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.shape[0] > 8:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return self.linear(x)

    record = accelbench.bench(Greedy(), (torch.randn(4, 4), torch.randint(0, 2, (4,))), device="cpu",
                              modes="train", steps=2, warmup=0, batch_size=[4, 8, 16, 32], save=False,
                              isolation="none")
    assert record.kind == "sweep"
    assert "mnist" not in record._repr_html_() and "bench:Greedy train on cpu: " in record._repr_html_()
    assert [(c.batch_size, c.status) for c in record.cases] == [
        (4, "ok"), (8, "ok"), (16, "oom"), (32, "oom")]
    assert "Tried to allocate" in record.cases[2].error
    assert record.cases[3].error == "not run: batch 16 already ran out of memory on cpu"
    assert record.cases[3].skipped and not record.cases[3].step_times


def test_cli_sweep_gives_table_saturation_and_a_report_section(cli, tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    done = cli("sweep", "mnist", "--batch-size", "1,2,...,4", "--device", "cpu", "--size", "tiny",
               "--steps", "3", "--warmup", "1", "-o", str(out), "--quiet",
               env={"COLUMNS": "100"})  # a pipe honours COLUMNS (issue 36)
    assert done.returncode == 0, done.stderr
    assert re.search(r"mnist train on cpu: (saturates at batch \d+|not saturated by batch 4)", done.stdout)
    assert "samples/s" in done.stdout and "95% CI" in done.stdout
    assert all(len(line) <= 100 for line in done.stdout.splitlines())
    data = json.loads(out.read_text())
    assert data["kind"] == "sweep" and data["options"]["sweep"]["batch_sizes"] == [1, 2, 4]
    assert [(c["batch_size"], c["status"]) for c in data["cases"]] == [(1, "ok"), (2, "ok"), (4, "ok")]
    report = tmp_path / "report.html"
    made = cli("report", data["run_id"], "-o", str(report))
    assert made.returncode == 0, made.stderr
    page = report.read_text()
    assert "Batch-size sweeps: saturation and crossover" in page
    assert "Throughput against batch size" in page and "data:image/png;base64," in page
    assert summary_lines(RunRecord.from_dict(data))[0] in page


def test_cli_sweep_bad_batch_list_is_one_line_exit_2(cli) -> None:
    done = cli("sweep", "mnist", "--batch-size", "4,x", "--device", "cpu")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "'x' is not a whole number" in done.stderr


def test_the_terminal_table_fits_100_columns_with_a_long_name_and_an_error() -> None:
    from rich.console import Console

    from accelbench.render.sweep_table import sweep_table

    cases = [_case("cuda:1", b, b / r) for b, r in ((1, 1234), (4, 45678), (16, 123456))]
    cases.append(_case("cuda:1", 64, 1, status="oom"))
    for case in cases:
        case.workload = "torchvision:vit_b_16"
    case.error = "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.2 GiB total capacity)"
    console = Console(width=100, record=True)
    console.print(sweep_table(_record(cases)))
    text = console.export_text()
    lines = text.splitlines()
    assert lines[0].startswith("accelbench sweep s1: torchvision:vit_b_16")
    assert all(len(line.rstrip()) <= 100 for line in lines)
    assert "samples/s" in lines[1] and "95% CI" in lines[1] and "123,456" in text and "OOM" in text


def test_peak_memory_carries_its_source_tag_as_in_the_run_table() -> None:
    # The sweep printed the CPU's whole-process peak RSS and an accelerator's live tensors in one
    # column, untagged, and an MPS sampled figure without its "≥".
    from rich.console import Console

    from accelbench.render.sweep_table import COLUMNS, sweep_rows, sweep_table

    cpu, cuda, mps = _case("cpu", 16, 0.1), _case("cuda:0", 16, 0.01), _case("mps:0", 16, 0.02)
    cpu.peak_memory_bytes, cpu.memory_source = 900 * 2**20, "process peak RSS (psutil)"
    cuda.peak_memory_bytes = 3 * 2**30
    cuda.memory_source = "CUDA caching allocator peak (torch.cuda.max_memory_allocated: live tensors)"
    mps.peak_memory_bytes, mps.memory_is_lower_bound = 2**30, True
    mps.memory_source = "MPS live tensors sampled at step boundaries (a lower bound)"
    unknown = _case("cpu", 32, 0.2)  # an older result: no memory figure, no source
    column = COLUMNS.index("peak mem")
    cells = {row[2] + " " + row[3]: row[column] for row in sweep_rows(_record([cpu, unknown, cuda, mps]))}
    assert cells == {"cpu 16": "900.0 MiB RSS", "cpu 32": "n/a", "cuda:0 16": "3.0 GiB allocator",
                     "mps:0 16": "≥ 1.0 GiB sampled"}
    console = Console(width=100, record=True)
    console.print(sweep_table(_record([cpu, cuda, mps])))
    text = console.export_text()
    assert "RSS" in text and "allocator" in text and "≥ 1.0 GiB" in text and "sampled" in text


# --- generation: a prompt-length sweep --------------------------------------------------------
PROMPT_SWEEP = ("sweep", "nanogpt-char", "--mode", "generate", "--device", "cpu", "--size", "tiny",
                "--new-tokens", "8", "--steps", "2", "--warmup", "1", "--isolation", "none")


def test_cli_prompt_sweep_shows_decode_and_memory_against_context(cli, tmp_path: Path) -> None:
    out, report = tmp_path / "prompts.json", tmp_path / "prompts.html"
    done = cli(*PROMPT_SWEEP, "--prompt-len", "4,8,...,24", "-o", str(out), env={"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["kind"] == "sweep" and data["options"]["sweep"] == {"axis": "prompt_len",
                                                                   "prompt_lens": [4, 8, 16, 24]}
    cases = data["cases"]
    assert [(c["prompt_len"], c["new_tokens"], c["batch_size"], c["status"]) for c in cases] == [
        (4, 8, 1, "ok"), (8, 8, 1, "ok"), (16, 8, 1, "ok"), (24, 8, 1, "ok")]
    assert all(c["generation"]["decode_tokens_per_s"] > 0 for c in cases)
    # The KV cache grows with the context it holds.
    kv = [c["generation"]["kv_cache_bytes"] for c in cases]
    assert kv == sorted(kv) and kv[0] < kv[-1]
    flat = " ".join(done.stdout.split())  # the sentence may wrap at 100 columns
    assert re.search(r"nanogpt-char generate on cpu \(fp32 \+8 tokens, batch 1\): decode [\d,.]+ "
                     r"tok/s at a 4-token prompt, [\d,.]+ at 24 \([+-]\d+%\)", flat)
    assert "prompt 24: 4 case(s) done" in done.stderr
    assert "decode tok/s" in done.stdout and all(len(line) <= 100 for line in done.stdout.splitlines())
    made = cli("report", str(out), "-o", str(report))
    assert made.returncode == 0, made.stderr
    page = report.read_text()
    assert "Decode speed against prompt length" in page and "Every prompt length" in page


def test_a_batch_sweep_of_generation_counts_tokens_not_samples(cli, tmp_path: Path) -> None:
    """A generation case's rate is decode tokens/s over the batch: the table, the saturation
    sentence, the report's figure axis and table, and an export say so (they said samples/s)."""
    out, report = tmp_path / "gen.json", tmp_path / "gen.html"
    done = cli(*PROMPT_SWEEP, "--prompt-len", "8", "--batch-size", "1,2", "-o", str(out))
    assert done.returncode == 0, done.stderr
    # One prompt length with a batch list: a batch-size sweep at that prompt and --new-tokens.
    data = json.loads(out.read_text())
    assert data["options"]["sweep"]["batch_sizes"] == [1, 2]
    cases = [(c["batch_size"], c["prompt_len"], c["new_tokens"]) for c in data["cases"]]
    assert cases == [(1, 8, 8), (2, 8, 8)]
    flat = " ".join(done.stdout.split())
    assert "decode tokens/s" in flat and "samples/s" not in flat, done.stdout
    assert re.search(r"best [\d,.]+ decode tokens/s at batch [12]", flat)
    made = cli("report", str(out), "-o", str(report))
    assert made.returncode == 0, made.stderr
    page = report.read_text()
    assert "<th>decode tokens/s</th>" in page and "<th>samples/s</th>" not in page
    exported = cli("export", json.loads(out.read_text())["run_id"], "--format", "markdown")
    assert exported.returncode == 0, exported.stderr
    # The Markdown export's generation table names each rate's unit in its cell ("9.2 decode tokens/s").
    assert " decode tokens/s |" in exported.stdout and "samples/s" not in exported.stdout


@pytest.mark.parametrize("args,message", [
    (["--prompt-len", "4,30"], "do not fit the 32-token context of 'nanogpt-char'"),
    (["--prompt-len", "4,8", "--batch-size", "1,2"], "one axis at a time"),
    (["--prompt-len", "4,8", "--batch-size", "1,2"], "with a --prompt-len list"),
    (["--prompt-len", "0,8"], "--prompt-len: 0 is out of range"),
])
def test_bad_prompt_sweeps_are_one_line_errors(cli, args: list[str], message: str) -> None:
    done = cli(*PROMPT_SWEEP, *args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr


def test_prompt_len_needs_generate_and_a_sweep_needs_an_axis(inline_cli) -> None:
    done = inline_cli("sweep", "mnist", "--prompt-len", "4,8", "--device", "cpu")
    assert done.returncode == 2 and "--prompt-len sweeps generation: give --mode generate" in done.stderr
    done = inline_cli("sweep", "mnist", "--device", "cpu")
    assert done.returncode == 2 and "sweep needs --batch-size LIST" in done.stderr
    done = inline_cli("sweep", "mnist", "--batch-size", "1,2", "--new-tokens", "8", "--device", "cpu")
    assert done.returncode == 2 and "--new-tokens goes with --mode generate" in done.stderr


def test_a_prompt_that_runs_out_of_memory_stops_longer_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """A decoder that fails as an allocator does above an 8-token prompt: 16 is 'oom', 24 is not
    even run, and the summary says where memory ran out."""
    from accelbench.devices import DeviceSet
    from accelbench.options.values import build_run_options
    from accelbench.render.generation_sweep import prompt_sweep_lines
    from accelbench.sweeps.run import run_sweep
    from accelbench.workloads.builtin import decoder

    prefill = decoder.prefill

    def greedy(model, ids, cache):  # type: ignore[no-untyped-def]
        if ids.shape[1] > 8:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return prefill(model, ids, cache)

    monkeypatch.setattr(decoder, "prefill", greedy)
    options = build_run_options(["nanogpt-char"], "cpu", "generate", size="tiny", new_tokens=4,
                                steps=1, warmup=0, isolation="none", prompt_len=[4, 8, 16, 24])
    record = run_sweep(options, DeviceSet.current(), (4, 8, 16, 24), ["test"], axis="prompt_len")
    assert [(c.prompt_len, c.status) for c in record.cases] == [
        (4, "ok"), (8, "ok"), (16, "oom"), (24, "oom")]
    assert record.cases[3].error == "not run: prompt 16 already ran out of memory on cpu"
    assert "out of memory from a 16-token prompt" in prompt_sweep_lines(record)[0]
