"""The entry of every process a launcher starts:

- ``python -m accelbench.engine.launchers.worker SPEC.json RESULT.json``: one case in a worker
  process (``process.py``): the spec's work, its progress as lines on stdout, its result (and
  partial results while it runs) in RESULT.json;
- ``python -m accelbench.engine.launchers.worker --serve [WORK]``: a warm worker (``warm.py``),
  which imports WORK's module (or, not named yet, the engine's measuring) at once, then runs one
  case per line of stdin (``["SPEC.json", "RESULT.json"]``) as above, each begun fresh
  (``fresh.py``), and says when each is done;
- ``python -m accelbench.engine.launchers.worker --rank SPEC.json``: one rank under torchrun
  (``rank.py``), which writes its own report.

The spec (``engine/spec.py``) names the work, the subcommand's own function (``module:function``);
the files it names (a ``bench()`` model's) are loaded first. A crash, a hang or an out-of-memory
kill here costs only this case.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path


def run_one(spec_path: Path, result_path: Path) -> None:
    """The spec's work, its result written to ``result_path``."""
    from accelbench.engine.launchers.base import Report, print_progress, worker_function
    from accelbench.engine.spec import CaseSpec, load_model_files
    from accelbench.files import write_atomic

    spec = CaseSpec.from_json(spec_path.read_text())
    load_model_files(spec.model_files)
    result = worker_function(spec.work)(spec, Report(print_progress, result_path))
    write_atomic(result_path, json.dumps(result.to_dict()))


def serve(work: str | None, requests: Iterable[str]) -> int:
    """A warm worker: every case of ``requests`` in this process, each begun as in a fresh one.
    An exception outside a case's own work (a spec that cannot be read) ends the worker: its
    case is reported crashed, with the traceback, and the next one gets a fresh worker."""
    from accelbench.engine.launchers.base import DONE_PREFIX, worker_function
    from accelbench.engine.launchers.fresh import ProcessState

    # Imported now, while the launcher prepares the first case (every work that measures steps
    # goes through measure_case), with torch's compiler, which torch imports when the first
    # optimizer is made (seconds on a small machine) and a compiled case when it compiles:
    # neither is inside a timed region, and a first compile's cost here is its compiling.
    worker_function(work or "accelbench.engine.measure_case:run_case")
    import torch._dynamo  # noqa: F401
    state = ProcessState.now()
    for line in requests:
        spec_path, result_path = json.loads(line)
        state.renew()
        run_one(Path(spec_path), Path(result_path))
        print(DONE_PREFIX, flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv[0] == "--rank":
        from accelbench.engine.launchers.rank import run_rank

        return run_rank(Path(argv[1]))
    if argv[0] == "--serve":
        return serve(argv[1] if len(argv) > 1 else None, sys.stdin)
    run_one(Path(argv[0]), Path(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
