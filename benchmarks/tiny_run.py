"""How long does ``accelbench run mnist vae nanogpt-char --size tiny --device cpu`` take, before
and after issue 30's quick tiny runs (a 1 s budget with a fitted stop rule, one warm worker)?

Target (issue 30): under 30 s on the 2-core development VM.

Two contenders run the same command line, each as a fresh ``python -m accelbench`` process:

- ``before``: the code of a git revision (``--before REV``; by default the parent of the commit
  that added the warm worker, or HEAD while it is uncommitted), exported with ``git archive`` into
  a temporary folder and run from there (``PYTHONPATH``), with the same interpreter and packages;
- ``after``: this checkout.

They run interleaved, the order alternating every round (ABBA...), so slow drift of a shared
machine spreads over both. Both write into one fresh ``ACCELBENCH_HOME``, first warmed by one
untimed run of each (the CPU's peak FLOP/s is measured into its cache there, as on any machine
that ran accelbench before). Each run gives the wall time of the whole command, its cases'
statuses, how many worker processes it started (``after``: the distinct warm-worker pids in the
results; ``before``: one per case) and the 1-minute load average before and after it: this
machine is shared, so the load is part of every figure. The summary gives each contender's
median, minimum and maximum, and the median of the per-round ratios before / after.

``--timeline`` instead runs the same plan once in this process as the command does (the warm
worker started before torch is imported, then ``run_plan``) and prints when each phase of each
case began, and each case's warm-up and measured seconds: where the time of a run goes.

    .venv/bin/python benchmarks/tiny_run.py --rounds 3
    .venv/bin/python benchmarks/tiny_run.py --rounds 3 --args "--threads 1"
    .venv/bin/python benchmarks/tiny_run.py --timeline
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMAND = ["run", "mnist", "vae", "nanogpt-char", "--size", "tiny", "--device", "cpu", "--quiet"]
WARM_FILE = "src/accelbench/engine/launchers/warm.py"


def default_before() -> str:
    """The parent of the commit that added the warm worker; HEAD while it is not committed."""
    added = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "-1", "--", WARM_FILE],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    return f"{added}^" if added else "HEAD"


def export(revision: str, folder: Path) -> Path:
    """``revision``'s src/ in ``folder``; the path to put first on PYTHONPATH."""
    archive = subprocess.run(["git", "archive", "--format=tar", revision, "src"], cwd=REPO,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder / "src"


def one_run(name: str, source: Path, home: Path, extra: list[str], out: Path) -> dict:
    env = {**os.environ, "ACCELBENCH_HOME": str(home),
           "PYTHONPATH": os.pathsep.join(p for p in (str(source), os.environ.get("PYTHONPATH", ""))
                                         if p)}
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "accelbench", *COMMAND, *extra, "-o", str(out)],
                          env=env, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - start
    cases = json.loads(out.read_text())["cases"] if out.exists() else []
    warm = {case.get("isolation") for case in cases
            if str(case.get("isolation", "")).startswith("warm worker")}
    return {"contender": name, "seconds": seconds, "returncode": done.returncode,
            "cases": len(cases), "statuses": sorted({case["status"] for case in cases}),
            "workers": len(warm) if warm else len(cases),
            "load_before": load_before, "load_after": os.getloadavg()[0],
            "stderr_tail": done.stderr[-400:] if done.returncode not in (0, 1) else ""}


def timeline() -> None:
    """The command's steps in this process, with the time each phase of each case began."""
    began = time.perf_counter()

    def log(*what: object) -> None:
        print(f"{time.perf_counter() - began:7.2f} s", *what, flush=True)

    from accelbench.options.values import build_run_options, check_data

    options = build_run_options(["mnist", "vae", "nanogpt-char"], "cpu", "train,eval", size="tiny")
    from accelbench.engine.launchers.warm import start_ahead

    start_ahead()
    log("options built, warm worker started")
    check_data(options)
    from accelbench.devices import DeviceSet
    from accelbench.engine.case import plan
    from accelbench.engine.runner import run_plan

    devices = DeviceSet.current()
    cases = plan(options, devices)
    log("torch imported, cases planned")
    last: dict[str, str] = {}

    def progress(case: object, phase: str, done: float, total: float | None) -> None:
        label = getattr(case, "label", "")
        if last.get(label) != phase:
            last[label] = phase
            log(label, phase)

    record = run_plan(options, devices, cases, ["accelbench", *COMMAND], progress=progress)
    log("done")
    for case in record.cases:
        print(f"{case.workload} {case.mode}: warm-up {case.warmup_time_s or 0:.2f} s, measured "
              f"{case.measured_time_s:.2f} s in {len(case.step_times)} samples ({case.stop_reason})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=None, help="the revision to time as before")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--args", default="", help="more arguments for the command, quoted")
    parser.add_argument("--timeline", action="store_true",
                        help="time the phases of one run in this process instead")
    args = parser.parse_args()
    if args.timeline:
        timeline()
        return
    revision = args.before or default_before()
    extra = shlex.split(args.args)
    with tempfile.TemporaryDirectory(prefix="accelbench-tiny-bench-") as folder:
        root = Path(folder)
        (root / "before").mkdir()
        sources = {"before": export(revision, root / "before"), "after": REPO / "src"}
        home = root / "home"
        print(f"# command: accelbench {shlex.join(COMMAND + extra)}; before = {revision}; "
              f"{os.cpu_count()} CPUs", flush=True)
        for name, source in sources.items():  # untimed: the peak cache and the disk's caches
            print(json.dumps({"warm-up": one_run(name, source, home, extra, root / "w.json")}),
                  flush=True)
        runs = []
        for index in range(args.rounds):
            order = ["before", "after"] if index % 2 == 0 else ["after", "before"]
            for name in order:
                run = one_run(name, sources[name], home, extra, root / f"{name}-{index}.json")
                run["round"] = index
                runs.append(run)
                print(json.dumps(run), flush=True)
    summary: dict[str, dict[str, float]] = {}
    for name in ("before", "after"):
        seconds = [run["seconds"] for run in runs if run["contender"] == name]
        summary[name] = {"median_s": statistics.median(seconds), "min_s": min(seconds),
                         "max_s": max(seconds)}
    ratios = [next(r["seconds"] for r in runs if r["round"] == i and r["contender"] == "before")
              / next(r["seconds"] for r in runs if r["round"] == i and r["contender"] == "after")
              for i in range(args.rounds)]
    loads = [run[key] for run in runs for key in ("load_before", "load_after")]
    print(json.dumps({"summary": summary, "ratio_before_over_after_median": statistics.median(ratios),
                      "load_average_1min": [min(loads), max(loads)]}, indent=1))


if __name__ == "__main__":
    main()
