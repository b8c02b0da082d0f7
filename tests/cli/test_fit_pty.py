"""Issue 30 (item A): every command's typical output and every ``--help``, printed into a real
pseudo-terminal of 80, 100 and 160 columns (rich and argparse read its size: COLUMNS unset), fit:
no line wider than the terminal, no "…" inside a figure, and no token split across lines (a
number with its unit, a date, an id, a flag, a name). Issue 36: the same printed into a pipe with
COLUMNS=80/100/160 (``| less``, ``| tee``, a CI log), every ``--protocol`` included; no value split
from its label ("TTFT" / "169.0 ms", "batch" / "1"), no line ending in blanks.

A token is split when two words continuing one cell across lines join into a word of the same
output at 1,000 columns that one of them is not ("transformer-sma" / "ll", "2026-11-26T01:39" /
":03+00:00", "--prompt-" / "len"), or are a number and its unit ("42.6" / "ms"). The outputs come from
stored and synthetic records (tests/fit_show.py renders them as the commands do) and from the
real commands that read stored results (history, compare, share --dry-run); nothing is measured.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from conftest_report import case, record
from conftest_share import write_peer_bundles
from rich.cells import cell_len
from test_table import _widest_record

from accelbench.cli import COMMANDS
from accelbench.measure.generation.execution import Execution
from accelbench.measure.generation.rounds import GenerationFigures, GenerationRound
from accelbench.options.recorded import RecordedCheck
from accelbench.results import CaseResult, Parity, ParityTolerance, RunRecord
from accelbench.results.generation import Generation

REPO = Path(__file__).resolve().parents[2]
WIDTHS = (80, 100, 160)
REFERENCE = 1000
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
#: What a figure's unit looks like when a line starts with it.
_UNIT = re.compile(r"(?:ms|s|µs|min|GiB|MiB|KiB|GB|MB|kB|GB/s|TB/s|MB/s|tok/s|samples/s|GFLOPs|"
                   r"GMACs|GFLOP/s|TFLOP/s|J/step)[),;.]*$")
_NUMBER = re.compile(r"[(\[≥≤±~]*-?\d[\d.,]*(?:e[-+]?\d+)?$")
#: A label a value follows ("TTFT", "batch", "RAM", "30:"), and the value's start.
_LABEL = re.compile(r"\(?[A-Za-z][A-Za-z_]*$|\S+:$")
_VALUE = re.compile(r"[±~≈-]?\d")


def _pty_output(argv: list[str], columns: int, env: dict[str, str], timeout: float = 120) -> str:
    """What ``argv`` prints to a terminal ``columns`` wide (stdout and stderr both on the pty)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, columns, 0, 0))
    process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO,
                               close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                process.kill()
                raise AssertionError(f"{argv} printed nothing for {timeout} s")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end closed: the process has exited
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        process.wait(timeout=timeout)
    return _ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def _problems(text: str, reference: str, columns: int) -> list[str]:
    """Each line too wide, figure cut or token split in ``text`` (printed at ``columns``)."""
    whole = set(reference.split())
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines):
        if cell_len(line.rstrip()) > columns:
            found.append(f"line {number} is {cell_len(line.rstrip())} wide: {line!r}")
        if line != line.rstrip():
            found.append(f"line {number} ends in blanks: {line!r}")
        if any("…" in word and re.search(r"\d", word) for word in line.split()):
            found.append(f"a figure cut: {line!r}")
        if number:
            found += _splits(lines[number - 1], line, whole, reference)
    return found


def _splits(above: str, line: str, whole: set[str], reference: str) -> list[str]:
    """A word broken across two lines (its parts joined are a word of the unwrapped output, and
    one part is not), or a number and its unit (side by side in the unwrapped output), where the
    second part continues the first's cell: they start together (left-aligned), end together
    (right-aligned), or the first ends its line and the second begins the next (a paragraph)."""
    firsts = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", above)]
    found = []
    for index, match in enumerate(re.finditer(r"\S+", line)):
        second = match.group()
        for start, end, first in firsts:
            aligned = start == match.start() or end == match.end() or (
                index == 0 and end == len(above.rstrip()))
            if not aligned:
                continue
            broken = first + second in whole and (first not in whole or second not in whole)
            # The number ends its cell's line and the unit begins the next (two blanks or the
            # line's edge around them: a column's padding and the rule between columns).
            ends = (above[end:] + "  ").startswith("  ")
            begins = match.start() < 2 or line[match.start() - 2:match.start()] == "  "
            together = ends and begins and \
                re.search(rf"(?<!\S){re.escape(first)} {re.escape(second)}(?!\S)", reference)
            unit = together and bool(_NUMBER.match(first) and _UNIT.match(second))
            label = together and bool(_LABEL.match(first) and _VALUE.match(second))
            if broken or unit or label:
                found.append(f"{first!r} / {second!r} split: {above!r} / {line!r}")
    return found


def _sections(text: str) -> dict[str, str]:
    """fit_show.py's output by section ("=== NAME" lines)."""
    parts = re.split(r"^=== (.+)$", text, flags=re.MULTILINE)
    return {name.strip(): body for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def _generation_case() -> CaseResult:
    """A generation case whose times read "42.6 ms" and whose rates have units."""
    rounds = tuple(GenerationRound(0.0426 + i * 1e-4, 127 * 0.0131, (0.0131,) * 127) for i in range(5))
    figures = GenerationFigures(batch_size=1, prompt_len=512, new_tokens=128, timing_method="host clock",
                                rounds=rounds, warmup_rounds=1, kv_cache_bytes=75 * 2**20,
                                weight_bytes_per_step=248 * 2**20, cache_bytes_per_step=30 * 2**20)
    return CaseResult(workload="transformer-small", mode="generate", device="cpu", batch_size=1,
                      prompt_len=512, new_tokens=128, precision="bf16",
                      step_times=[t for r in rounds for t in r.token_times_s],
                      generation=Generation.from_dict(figures.to_dict()))


def _check_record() -> RunRecord:
    tolerance = ParityTolerance(passed=1e-2, drift=5e-2)
    steps = list(range(1, 6))
    passing = Parity("pass", steps, [1.0] * 5, [1.0] * 5, judged_steps=3, tolerance=tolerance,
                     max_rel_loss_diff=8.52e-3, output_rel_diff=1.3e-4)
    diverged = Parity("diverged", steps, [1.0] * 5, [2.0] * 5, tolerance=tolerance, first_bad_step=2,
                      max_rel_loss_diff=0.97, output_rel_diff=2.5e-1)
    cases = [case(workload="transformer-small", device="cuda:0", precision="amp-bf16", parity=passing),
             case(workload="simclr-resnet18", device="mps:0", compile_backend="inductor", parity=diverged),
             case(workload="vae", device="cuda:0", status="crashed", parity=Parity("failed"),
                  error="RuntimeError: CUDA error: an illegal memory access was encountered at "
                        "step 3 of 5 (allocated 17.2 GB, reserved 18.1 GB)")]
    checked = record("check0123456", cases, kind="check")
    return replace(checked, options=RecordedCheck(reference="cpu-fp64", check_steps=5))


def _sweep_record() -> RunRecord:
    cases = [case(workload="transformer-small", device=device, batch_size=batch, median=step, seed=batch)
             for device, scale in (("cpu", 1.0), ("cuda:0", 0.05))
             for batch, step in ((1, 0.01 * scale), (4, 0.03 * scale), (16, 0.1 * scale))]
    cases.append(case(workload="transformer-small", device="cuda:0", batch_size=64, status="oom",
                      step_times=[], error="torch.OutOfMemoryError: CUDA out of memory. Tried to "
                      "allocate 2.00 GiB (GPU 0; 23.6 GiB total capacity)"))
    return record("sweep0123456", cases, kind="sweep")


def _roofline() -> list[dict]:
    return [{"device": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3", "matmul_flops":
             {"fp32": 5.1e13, "tf32": 3.9e14, "bf16": 7.2e14}, "memory_bandwidth_bytes_per_s": 2.9e12,
             "launch_latency_s": 4.2e-6, "h2d_bytes_per_s": {"pinned": 5.3e10, "pageable": 2.1e10},
             "d2h_bytes_per_s": {"pinned": 5.2e10, "pageable": 1.9e10},
             "measured_at": "2026-11-26T01:39:03+00:00", "torch_version": "2.9.0",
             "method": {**{f"matmul_{name}": {"matrix_side": 8192, "products_per_sync": 20}
                           for name in ("fp32", "tf32", "bf16")},
                        "bandwidth_buffer_bytes": 2**30, "launches": 1000, "transfer_bytes": 2**28},
             "errors": {"matmul_fp16": "fp16 matrix products are not supported by this build "
                                       "(cuBLAS 12.4 on sm_90: RuntimeError at 8192x8192)"}}]


def _selftest() -> dict:
    checks = [{"status": "pass", "device": "cuda:0", "group": "timing", "name": "events agree with "
               "the host clock", "detail": "median 42.6 ms against 42.7 ms (0.2% apart, within 5%)"},
              {"status": "fail", "device": "mps:0", "group": "precision", "name": "bf16 matmul",
               "detail": "max rel. error 8.52e-03 beyond 1.00e-03 at 2048x2048 (tf32 rounding "
                         "where fp32 was asked for)"}]
    return {"passed": False, "checks": checks, "wall_time_s": 33.4}


def _doctor() -> dict:
    return {"python": {"version": "3.11.9", "implementation": "CPython", "architecture": "x86_64",
                       "pointer_bits": 64},
            "torch": {"version": "2.9.0+cu126", "cuda_build": "12.6", "hip_build": None,
                      "cudnn": 91002, "mps_built": False, "xpu_built": False},
            "cpu": {"name": "AMD EPYC 9654 96-Core Processor", "physical_cores": 96, "logical_cores": 192,
                    "torch_threads": 96, "parallel_backend": "OpenMP", "memory_total_bytes": 1.5 * 2**40,
                    "blas": "OpenBLAS 0.3.27", "onednn": "v3.7.1"},
            "devices": [{"kind": "cpu", "available": True, "instances": [
                {"device": "cpu", "name": "AMD EPYC 9654", "memory_total_bytes": 1.5 * 2**40}]},
                {"kind": "cuda", "available": True, "instances": [
                    {"device": "cuda:0", "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 * 2**30,
                     "memory_free_bytes": 79 * 2**30, "compute_capability": "9.0", "driver": "560.35.03"}]},
                {"kind": "mps", "available": False, "reason": "not a Mac: MPS is Apple silicon's GPU",
                 "fix": "none on this machine"},
                {"kind": "xpu", "available": False, "reason": "this torch build has no XPU support "
                 "(torch.xpu.is_available() is False)", "fix": "pip install torch --index-url "
                 "https://download.pytorch.org/whl/xpu"}],
            "best_device": "cuda:0", "warnings": ["the GPU's clocks were below their maximum for "
                                                  "the last 12.5 s (power cap 690 W of 700 W)"]}


def _list_facts() -> list[dict]:
    common = {"source": "built-in", "available": True, "tokens_per_sample": {}, "counted_on": "cpu",
              "count_error": None, "unavailable_reason": None}
    return [
        {**common, "name": "resnet50", "description": "ResNet-50 on ImageNet-sized 224x224 images",
         "modes": ["train", "eval"], "input_shape": [3, 224, 224],
         "default_batch_size": {"train": 64, "eval": 256}, "dataset_size": {"train": 1281167, "eval": 50000},
         "parameters": 25557032, "flops_per_sample": {"train": 2.45e10, "eval": 8.18e9},
         "forward_flops_per_sample": 8.18e9,
         "torchvision": {"weights": "ResNet50_Weights.IMAGENET1K_V2", "gmacs": 4.09,
                         "parameters": 25557032, "metrics": {"acc@1": 80.858}, "note": "V2 weights"}},
        {**common, "name": "transformer-small", "description": "a small encoder on SST-2 sentences",
         "modes": ["train", "eval", "generate"], "input_shape": [128],
         "default_batch_size": {"train": 64, "eval": 64}, "dataset_size": {"train": 67349, "eval": 872},
         "parameters": 4200000, "flops_per_sample": {"train": 3.2e9}, "forward_flops_per_sample": 1.07e9},
        {**common, "name": "llama-1b", "description": "Llama 3.2 1B's shape", "available": False,
         "unavailable_reason": "needs the transformers package: pip install accelbench[transformers]",
         "modes": ["generate"], "input_shape": [512], "default_batch_size": {}, "dataset_size": {},
         "parameters": None, "flops_per_sample": {}, "forward_flops_per_sample": None},
    ]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The records and reports tests/fit_show.py renders, and what the real commands read."""
    folder = tmp_path_factory.mktemp("fit")
    run = _widest_record()
    run = replace(run, run_id="0123456789ab", cases=[*run.cases, _generation_case()])
    for name, data in (("run.json", run.to_dict()), ("check.json", _check_record().to_dict()),
                       ("sweep.json", _sweep_record().to_dict()), ("roofline.json", _roofline()),
                       ("selftest.json", _selftest()), ("doctor.json", _doctor()),
                       ("list.json", _list_facts())):
        (folder / name).write_text(json.dumps(data))
    for name in ("probe.json", "scale.json"):
        shutil.copy(REPO / "tests" / "data" / "v1" / name, folder / name)
    shutil.copy(REPO / "tests" / "data" / "v1" / "history.sqlite", folder / "history.sqlite")
    earlier = replace(run, run_id="fedcba987654", created_at="2026-11-23T04:12:28+00:00")
    (folder / "earlier.json").write_text(json.dumps(earlier.to_dict()))
    for name, protocol_run in _protocol_records().items():
        (folder / f"{'plain-mlperf' if name == 'none' else 'protocol-' + name}.json").write_text(
            json.dumps(protocol_run.to_dict()))
    write_peer_bundles(folder / "bundles")
    return folder


def _protocol_records() -> dict[str, RunRecord]:
    """A run of each --protocol (test_protocol_figures' cases), the gpt-fast one compiled with CUDA
    graphs on a GPU (the longest case label: "llama-1b cuda:0 bf16 compile:inductor:reduce-overhead
    +graphs [gpt-fast]"), and "none": mlperf-client's cases without a protocol, which compare
    finds not comparable with them ("protocol mlperf-client vs none")."""
    from test_protocol_figures import _record

    cases = _record("0123protocol", 1).cases
    recipe = Execution(kv_cache="static", prefill="eager", decode="compiled, fullgraph",
                       compile="inductor:reduce-overhead", cuda_graphs="captured (CUDA graphs)")
    cases = [replace(c, device="cuda:0", precision="bf16", compile_backend="inductor:reduce-overhead",
                     generation=replace(c.generation or Generation(), execution=recipe))
             if c.protocol == "gpt-fast" else c for c in cases]
    records = {name: RunRecord(f"{name[:6]}0123456", "2026-11-26T01:39:03+00:00", "0.1.0",
                               cases=[c for c in cases if c.protocol == name])
               for name in ("llama-bench", "gpt-fast", "mlperf-client")}
    plain = [replace(c, protocol="", generation=replace(c.generation or Generation(), protocol=None))
             for c in records["mlperf-client"].cases]
    records["none"] = RunRecord("none01234567", "2026-11-26T01:39:03+00:00", "0.1.0", cases=plain)
    return records


def test_every_output_and_help_fits_a_real_terminal(stored: Path, tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    env.update({"ACCELBENCH_HOME": str(tmp_path / "home"), "TERM": "xterm-256color",
                "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])})
    widths = (REFERENCE, *WIDTHS)
    # One interpreter renders everything at every width (fit_show.py resizes its terminal) ...
    show = [sys.executable, str(REPO / "tests" / "fit_show.py"), str(stored), *map(str, widths)]
    # ... and the entry point itself runs in a real process at each width.
    entry = [sys.executable, "-m", "accelbench", "sweep", "--help"]
    jobs = [(show, 80), *((entry, width) for width in widths)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        printed, *helps = pool.map(lambda job: _pty_output(job[0], job[1], env), jobs)
    by_width = _by_width(printed)
    for width, text in zip(widths, helps, strict=True):
        by_width[width]["python -m accelbench sweep --help"] = text
    _check_fits(by_width, ("python -m accelbench sweep --help",))


def test_every_output_fits_a_pipe_at_the_columns_asked(stored: Path, tmp_path: Path) -> None:
    """Issue 36: into a pipe (``| less``, ``| tee``, a CI log) the width is COLUMNS, not a fixed
    160: the same outputs, every --protocol among them, printed by one real process into a pipe
    at each width (fit_show.py sets COLUMNS), and a real ``compare --published`` at each width and
    with COLUMNS unset and no terminal anywhere (the default: 100 columns)."""
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    env.update({"ACCELBENCH_HOME": str(tmp_path / "home"), "TERM": "xterm-256color",
                "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])})
    widths = (REFERENCE, *WIDTHS)
    published = [sys.executable, "-m", "accelbench", "compare", "--published",
                 str(stored / "protocol-mlperf-client.json"), str(stored / "protocol-gpt-fast.json")]
    jobs = [([sys.executable, str(REPO / "tests" / "fit_show.py"), str(stored), *map(str, widths)], None),
            (published, None), *((published, width) for width in widths)]

    def piped(job: tuple[list[str], int | None]) -> str:
        argv, columns = job
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=REPO,
                              env={**env, **({"COLUMNS": str(columns)} if columns else {})}, timeout=300)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return done.stdout

    with ThreadPoolExecutor(max_workers=3) as pool:
        printed, unset, *real = pool.map(piped, jobs)
    by_width = _by_width(printed)
    for width, text in zip(widths, real, strict=True):
        by_width[width]["real compare --published"] = text
    assert max(map(cell_len, unset.splitlines())) in range(100 - 12, 101), unset  # the default
    assert not _problems(unset, by_width[REFERENCE]["real compare --published"], 100)
    _check_fits(by_width, ("real compare --published",))


def _by_width(printed: str) -> dict[int, dict[str, str]]:
    """fit_show.py's output: each width's sections."""
    assert "Traceback" not in printed, printed
    by_width: dict[int, dict[str, str]] = {width: {} for width in (REFERENCE, *WIDTHS)}
    for name, body in _sections(printed).items():
        width, _, section = name.partition(" ")
        by_width[int(width)][section] = body
    return by_width


def _check_fits(by_width: dict[int, dict[str, str]], extra: tuple[str, ...]) -> None:
    """Every output made at every width, each width used, and nothing too wide, cut or split."""
    reference = by_width[REFERENCE]
    protocols = 3 + 3  # run --protocol each, then compare, compare --published and share of them
    assert len(reference) == 10 + 1 + len(COMMANDS) + 2 + 6 + protocols + len(extra), sorted(reference)
    assert all(body.strip() for body in reference.values()), reference
    for width in (REFERENCE, *WIDTHS):  # each width reached rich and argparse: the widest line uses it
        for section in ("run --wide", "run --help", "run --protocol mlperf-client", *extra):
            assert max(map(cell_len, by_width[width][section].splitlines())) > min(width, 170) - 12
    problems = []
    for width in WIDTHS:
        assert by_width[width].keys() == reference.keys(), width
        for section, body in by_width[width].items():
            assert "Traceback" not in body and "error:" not in body.partition("\n")[0], (section, body)
            problems += [f"{section} at {width}: {problem}"
                         for problem in _problems(body, reference[section], width)]
    assert not problems, "\n".join(problems)


def test_the_fragment_and_split_checks_catch_what_rich_and_argparse_did() -> None:
    """The checks themselves, on the defects the issue saw (a test that could not fail proves
    nothing)."""
    reference = "transformer-small 2026-11-26T01:39:03+00:00 --prompt-len 8.52e-03 42.6 ms x y"
    assert _problems("transformer-sma\nll", reference, 80)
    assert _problems("2026-11-26T01:39\n:03+00:00", reference, 80)
    assert _problems("--prompt-\nlen", reference, 80)
    assert _problems("8.52e…", reference, 80)
    assert _problems("  42.6  x\n  ms    y", reference, 80)  # left-aligned cell
    assert _problems("x  42.6\ny    ms", reference, 80)  # right-aligned cell
    assert _problems("took 42.6\nms in all", reference, 80)  # a paragraph
    assert _problems("x" * 81, reference, 80)
    labelled = "TTFT 169.0 ms x y batch 1 max of 30: 52.0 ms"
    assert _problems("x: TTFT\n   169.0 ms", labelled, 80)  # a value apart from its label
    assert _problems("x  batch  y\n   1", labelled, 80)
    assert _problems("of 30:\n52.0 ms", labelled, 80)
    assert _problems("x y  \nz", reference, 80)  # blanks at a line's end
    assert not _problems("transformer-small  42.6 ms\n2026-11-26T01:39:03+00:00", reference, 80)
