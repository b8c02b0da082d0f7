"""Shared fixtures: an isolated accelbench home, a real-subprocess CLI runner, and the hardware
personalities (tests/personalities) for the real-subprocess runner and in this process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: Emulated devices that fail the way the real ones do (tests/personalities/README.md).
PERSONALITIES = REPO / "tests" / "personalities"
if str(PERSONALITIES) not in sys.path:
    sys.path.insert(0, str(PERSONALITIES))


@pytest.fixture(scope="session")
def peak_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One measurement of the CPU's matmul peak serves the whole session."""
    return tmp_path_factory.mktemp("peak") / "peak_flops.json"


@pytest.fixture(autouse=True)
def accelbench_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, peak_cache: Path) -> Path:
    """Every test writes results into its own folder, never the user's."""
    home = tmp_path / "accelbench-home"
    monkeypatch.setenv("ACCELBENCH_HOME", str(home))
    monkeypatch.setenv("ACCELBENCH_PEAK_CACHE", str(peak_cache))
    return home


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process the machine reads as quiet to the peak's busy check (issue 26, item 11;
    devices/contention.py), so what a test asserts about cached peaks never depends on what else
    the machine runs. Tests of that check hand in their own conditions; commands run in a
    subprocess read the real machine."""
    from accelbench.devices import contention

    quiet = contention.Conditions(1.0, 0.0, 0.0, None)

    class QuietWatch:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def start(self) -> None:
            pass

        def stop(self) -> contention.Conditions:
            return quiet

    monkeypatch.setattr(contention, "ContentionWatch", QuietWatch)
    monkeypatch.setattr(contention, "now", lambda *args, **kwargs: quiet)


def torch_numeric_defaults() -> None:
    """Put torch's process-wide numeric switches back as a fresh process has them (matmul
    "highest", cuDNN TF32 on, every fp32_precision inheriting, cudnn.benchmark off)."""
    import torch

    backends = torch.backends
    backends.fp32_precision = "none"
    if hasattr(backends.cudnn, "fp32_precision"):
        backends.cudnn.fp32_precision = "none"
        backends.mkldnn.set_flags(_fp32_precision="none")  # its attribute sets torch's switch
    torch.set_float32_matmul_precision("highest")
    backends.cudnn.allow_tf32 = True
    for switch in (getattr(backends.cuda.matmul, "fp32_precision", None) and backends.cuda.matmul,
                   getattr(backends.mkldnn, "matmul", None), getattr(backends.mkldnn, "conv", None),
                   getattr(backends.mkldnn, "rnn", None)):
        if switch:
            switch.fp32_precision = "none"
    backends.cudnn.benchmark = False


@pytest.fixture(autouse=True)
def _torch_numeric_switches_put_back():
    """A test that runs a case in this process, or sets a switch itself, leaves the next test
    torch's defaults: the emulated Ampere reads these switches at every op."""
    yield
    if "torch" in sys.modules:
        torch_numeric_defaults()


@pytest.fixture
def one_thread():
    """torch on one intra-op thread for the test (put back after): a module of small steps opts in
    with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def inline_cli(accelbench_home: Path, monkeypatch: pytest.MonkeyPatch):
    """Run ``accelbench.cli.main(ARGS)`` in this process (no interpreter start-up, no torch import:
    for the many bad-usage cases; ``cli`` proves the same path in a real process). Returns a
    CompletedProcess with the exit code and what was written to stdout and stderr."""
    import contextlib
    import io

    from accelbench.cli import main

    monkeypatch.setenv("COLUMNS", "160")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 1
        return subprocess.CompletedProcess(["accelbench", *args], code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def cli(accelbench_home: Path):
    """Run ``python -m accelbench ARGS`` as a real process; returns CompletedProcess."""

    def run(*args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "ACCELBENCH_HOME": str(accelbench_home), "COLUMNS": "160",
                    **(env or {})}
        return subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                              text=True, timeout=timeout, env=full_env, cwd=cwd)

    return run


@pytest.fixture
def personality_env(tmp_path: Path):
    """``personality_env(NAME, **VARS)`` -> (env, journal): with ``env`` passed to ``cli``, the
    CLI and every Python process it starts (workers, torchrun and its ranks) run on the emulated
    device NAME (ampere, mps, mps-nopeak, slow-sync); ``journal`` reads what they did there
    (accelbench_personalities.journal.Journal)."""
    from accelbench_personalities.journal import LOG_ENV, Journal

    def make(name: str, **variables: str) -> tuple[dict[str, str], Journal]:
        log = tmp_path / f"personality-{name}.jsonl"
        path = [str(PERSONALITIES), str(REPO / "src"), os.environ.get("PYTHONPATH", "")]
        env = {"PYTHONPATH": os.pathsep.join(p for p in path if p),
               "ACCELBENCH_TEST_PERSONALITY": name, LOG_ENV: str(log), **variables}
        return env, Journal(log)

    return make


@pytest.fixture
def personality(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``with personality(NAME) as journal:`` runs the block on the emulated device NAME in this
    process; torch is put back afterwards, the precision switches included."""
    import contextlib

    import accelbench_personalities
    import torch
    from accelbench_personalities.journal import LOG_ENV, Journal

    @contextlib.contextmanager
    def active(name: str):  # type: ignore[no-untyped-def]
        log = tmp_path / f"personality-{name}.jsonl"
        monkeypatch.setenv(LOG_ENV, str(log))
        torch_numeric_defaults()
        matmul = torch.get_float32_matmul_precision()
        cudnn = torch.backends.cudnn.allow_tf32, torch.backends.cudnn.enabled
        try:
            with accelbench_personalities.active(name):
                yield Journal(log)
        finally:
            torch.backends.fp32_precision = "none"
            torch.backends.cudnn.fp32_precision = "none"
            torch.set_float32_matmul_precision(matmul)
            torch.backends.cudnn.allow_tf32, torch.backends.cudnn.enabled = cudnn

    return active


@pytest.fixture
def tiny_hf_llama(tmp_path: Path) -> str:
    """``hf:FOLDER`` of a one-layer Llama config written here (no network): a causal language
    model whose generation uses transformers' own (growing) key/value cache."""
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "llama"
    transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                             max_position_embeddings=32).save_pretrained(folder)
    return f"hf:{folder}"


def rendered_text(renderable: object, width: int = 400) -> str:
    """What rich prints for ``renderable`` at ``width`` columns, as plain text (wide enough by
    default that no cell wraps: the tests look for whole values)."""
    import io

    from rich.console import Console

    console = Console(record=True, width=width, file=io.StringIO())
    console.print(renderable)
    return console.export_text()
