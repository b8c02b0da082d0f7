"""Does a refactor leave behaviour unchanged? Run every subcommand tiny, keep its result file, and
compare two such sets field by field.

Which fields "change from run to run" is not guessed: ``record`` the same code twice and every
field that differs between those two sets is volatile (ids, times, timings, sensors). A set
recorded after the change must then have the same keys and the same values everywhere else.

    python scripts/layout_equivalence.py record OUT_A      # before the change
    python scripts/layout_equivalence.py record OUT_B      # before again: finds the volatile fields
    python scripts/layout_equivalence.py record OUT_C      # after the change
    python scripts/layout_equivalence.py compare OUT_A OUT_B OUT_C
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TINY = ["--size", "tiny", "--device", "cpu"]
#: (name, arguments, where the result is: "-o" = the --output file, "stdout" = printed JSON)
COMMANDS: list[tuple[str, list[str], str]] = [
    ("run", ["run", "mnist", "vae", *TINY, "--steps", "3", "--warmup", "1"], "-o"),
    ("run-inline", ["run", "mnist", *TINY, "--steps", "3", "--warmup", "1", "--isolation", "none"],
     "-o"),
    ("run-generate", ["run", "gpt2", *TINY, "--mode", "generate", "--prompt-len", "8",
                      "--new-tokens", "4"], "-o"),
    ("run-protocol", ["run", "gpt2", *TINY, "--mode", "generate", "--protocol", "llama-bench"],
     "-o"),
    ("run-sustained", ["run", "mnist", *TINY, "--sustained", "0.05", "--sustained-interval",
                       "0.25"], "-o"),
    ("run-repeat", ["run", "mnist", *TINY, "--steps", "3", "--warmup", "1", "--repeat", "2"],
     "-o"),
    ("check", ["check", "mnist", *TINY, "--steps", "3"], "-o"),
    ("probe", ["probe", "--device", "cpu", "--feature", "*conv*", "--skip-compile"], "-o"),
    ("sweep", ["sweep", "mnist", *TINY, "--batch-size", "2,4", "--steps", "3", "--warmup", "1"], "-o"),
    ("scale", ["scale", "mnist", "--size", "tiny", "--device", "cpu", "--nproc", "1", "--steps", "3",
               "--warmup", "1"], "-o"),
    ("selftest", ["selftest", "--device", "cpu", "--only", "precision", "--quick", "--json"], "-o"),
    ("list", ["list", "--json"], "stdout"),
]


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="accelbench-layout-") as home:
        env = {**os.environ, "ACCELBENCH_HOME": home, "COLUMNS": "160"}
        for name, args, where in COMMANDS:
            target = out / f"{name}.json"
            command = [sys.executable, "-m", "accelbench", *args]
            if where == "-o":
                command += ["-o", str(target)]
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
            if where == "stdout":
                target.write_text(done.stdout)
            print(f"{name}: exit {done.returncode}", flush=True)
            (out / f"{name}.exit").write_text(f"{done.returncode}\n")


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Every leaf by its path; list items by index (a list's length is a leaf of its own)."""
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(flatten(item, f"{path}.{key}" if path else str(key)))
        return flat or {path: {}}
    if isinstance(value, list):
        flat = {f"{path}#len": len(value)}
        for index, item in enumerate(value):
            flat.update(flatten(item, f"{path}[{index}]"))
        return flat
    return {path: value}


def load(folder: Path, name: str) -> dict[str, Any]:
    path = folder / f"{name}.json"
    if not path.exists() or not path.read_text().strip():
        return {"#missing": True}
    return flatten(json.loads(path.read_text()))


def pattern(path: str) -> str:
    """A path with its list indices generalised, so a volatile field is volatile in every item."""
    return re.sub(r"\[\d+\]", "[]", path)


def compare(before: Path, again: Path, after: Path) -> int:
    problems = 0
    for name, _, _ in COMMANDS:
        a, b, c = load(before, name), load(again, name), load(after, name)
        volatile = {pattern(k) for k in set(a) | set(b) if a.get(k, object()) != b.get(k, object())}
        keys_a = {pattern(k) for k in a} - volatile
        keys_c = {pattern(k) for k in c} - volatile
        lost, gained = sorted(keys_a - keys_c), sorted(keys_c - keys_a)
        changed = sorted(k for k in set(a) & set(c)
                         if pattern(k) not in volatile and a[k] != c[k])
        exits = [(folder / f"{name}.exit").read_text().strip() for folder in (before, after)
                 if (folder / f"{name}.exit").exists()]
        status = "same" if not (lost or gained or changed) and len(set(exits)) <= 1 else "DIFFERENT"
        print(f"{name}: {status} ({len(a)} fields, {len(volatile)} volatile patterns; exit {exits})")
        for label, items in (("only before", lost), ("only after", gained)):
            for key in items[:20]:
                print(f"    {label}: {key}")
        for key in changed[:20]:
            print(f"    changed: {key}: {a[key]!r} -> {c[key]!r}")
        problems += status != "same"
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("record").add_argument("out", type=Path)
    comparing = sub.add_parser("compare")
    comparing.add_argument("folders", type=Path, nargs=3, metavar="FOLDER")
    args = parser.parse_args()
    if args.verb == "record":
        record(args.out)
        return 0
    return compare(*args.folders)


if __name__ == "__main__":
    raise SystemExit(main())
