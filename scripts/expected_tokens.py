"""Write src/accelbench/reference/expected_tokens.json: the fp64 CPU reference's greedy tokens (and
their hash) for the built-in decoders, for accelbench's default generation lengths and every
test of every ``--protocol``, at batch 1 and seed 0, with the reference's relative logit margin
at each position (best minus second-best logit over the position's largest |logit|, 3
significant digits: what a precision's first difference is judged against,
reference/expected_tokens.py). Each shape is decoded in fp32 too: the precisions that must
follow fp64 token for token (``MUST_FOLLOW``) must, on every shipped shape, or the script stops.

    .venv/bin/python scripts/expected_tokens.py            # every entry (minutes: fp64 on the CPU)
    .venv/bin/python scripts/expected_tokens.py --check    # recompute and compare, write nothing

Only the built-in decoders are shipped: their weights are accelbench's own seeded init, so a
version of the workload fixes them. (``hf:`` models are initialised by transformers, whose init
may change with its version; their results say "no reference shipped".) The published sizes are
shipped where the fp64 reference is affordable here: nanogpt-char and gpt2 (llama-1b's published
fp64 reference holds 10 GB of weights; its tiny size is shipped).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

import torch

from accelbench.devices.precisions import precision_spec
from accelbench.options import RunOptions
from accelbench.parity.generation import reference_tokens
from accelbench.reference.expected_tokens import EXPECTED_FILE, MUST_FOLLOW, tokens_hash
from accelbench.workloads.catalogue import get_workload_class
from accelbench.workloads.protocols import PROTOCOL_NAMES

#: (workload, size) pairs shipped.
SHIPPED = (("nanogpt-char", "tiny"), ("gpt2", "tiny"), ("llama-1b", "tiny"),
           ("nanogpt-char", "published"), ("gpt2", "published"))
SEED, BATCH = 0, 1
#: 2: every entry carries ``margins`` (1 had the tokens and hash only).
FORMAT = 2
#: Significant digits a margin is shipped with: the tie tolerances it is held against are a
#: factor of 2 or more apart, so a third digit decides nothing and keeps the file small.
DIGITS = 3


def lengths(workload: str, context: int) -> list[tuple[int, int]]:
    """accelbench's default lengths and every protocol test's, for a model of ``context``."""
    pairs = RunOptions(workloads=(workload,), modes=("generate",)).generation_lengths(workload, context)
    for name in PROTOCOL_NAMES:
        options = RunOptions(workloads=(workload,), modes=("generate",), protocol=name)
        pairs += options.generation_lengths(workload, context)
    return list(dict.fromkeys(pairs))


def entry(workload: str, size: str, prompt_len: int, new_tokens: int) -> dict[str, Any]:
    cls = get_workload_class(workload)
    instance = cls(size)

    def greedy(dtype: torch.dtype) -> tuple[list[list[int]], list[list[float]]]:
        return reference_tokens(instance, instance.build_model,  # type: ignore[arg-type]
                                batch_size=BATCH, prompt_len=prompt_len, new_tokens=new_tokens,
                                seed=SEED, dtype=dtype)

    tokens, margins = greedy(torch.float64)
    for name in MUST_FOLLOW:  # what MUST_FOLLOW claims, held on every shipped shape
        followed, _ = greedy(getattr(torch, precision_spec(name).param_dtype))
        if followed != tokens:
            raise SystemExit(f"{workload} {size} {prompt_len}+{new_tokens}: {name} leaves the fp64 "
                             "reference here, so it cannot be held to it token for token")
    return {"workload": workload, "workload_version": cls.version, "size": size, "seed": SEED,
            "batch_size": BATCH, "prompt_len": prompt_len, "new_tokens": new_tokens,
            "hash": tokens_hash(tokens), "tokens": tokens,
            "margins": [[float(f"{m:.{DIGITS}g}") for m in row] for row in margins]}


def entries(shipped: tuple[tuple[str, str], ...] = SHIPPED) -> Iterator[dict[str, Any]]:
    for workload, size in shipped:
        context = get_workload_class(workload)(size).context_length()
        for prompt_len, new_tokens in lengths(workload, context):
            yield entry(workload, size, prompt_len, new_tokens)


def _dumps(made: dict[str, Any]) -> str:
    """One entry a line: a diff shows which entry changed."""
    head = json.dumps({k: v for k, v in made.items() if k != "entries"})[:-1]
    lines = ",\n".join(json.dumps(e, separators=(",", ":")) for e in made["entries"])
    return f'{head}, "entries": [\n{lines}\n]}}\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="recompute and compare; write nothing")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", metavar="WORKLOAD:SIZE", action="append", default=[],
                        help="recompute these and keep the file's other entries")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    only = tuple(tuple(spec.split(":", 1)) for spec in args.only)
    fresh = list(entries(only or SHIPPED))  # type: ignore[arg-type]
    if only:
        kept = [e for e in json.loads(EXPECTED_FILE.read_text())["entries"]
                if (e["workload"], e["size"]) not in only]
        order = {pair: i for i, pair in enumerate(SHIPPED)}
        fresh = sorted(kept + fresh, key=lambda e: order[e["workload"], e["size"]])
    made = {"format": FORMAT, "torch": torch.__version__.split("+")[0],
            "made_by": "scripts/expected_tokens.py", "entries": fresh}
    text = _dumps(made)
    if args.check:
        shipped = json.loads(EXPECTED_FILE.read_text())["entries"]
        ok = ([(e["hash"], e.get("margins")) for e in shipped]
              == [(e["hash"], e["margins"]) for e in made["entries"]])
        print("the shipped tokens match" if ok else "the shipped tokens differ from a fresh run")
        return 0 if ok else 1
    EXPECTED_FILE.write_text(text)
    print(f"{len(made['entries'])} entries written to {EXPECTED_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
