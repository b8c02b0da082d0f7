"""The entry of every process a launcher starts:

- ``python -m accelbench.engine.launchers.worker SPEC.json RESULT.json``: one case in a worker
  process (``process.py``): the spec's work, its progress as lines on stdout, its result (and
  partial results while it runs) in RESULT.json;
- ``python -m accelbench.engine.launchers.worker --rank SPEC.json``: one rank under torchrun
  (``rank.py``), which writes its own report.

The spec (``engine/spec.py``) names the work, the subcommand's own function (``module:function``);
the files it names (a ``bench()`` model's) are loaded first. A crash, a hang or an out-of-memory
kill here costs only this case.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from accelbench.engine.launchers.base import Report, print_progress, worker_function
    from accelbench.engine.spec import CaseSpec, load_model_files
    from accelbench.files import write_atomic

    if argv[0] == "--rank":
        from accelbench.engine.launchers.rank import run_rank

        return run_rank(Path(argv[1]))
    spec_path, result_path = Path(argv[0]), Path(argv[1])
    spec = CaseSpec.from_json(spec_path.read_text())
    load_model_files(spec.model_files)
    result = worker_function(spec.work)(spec, Report(print_progress, result_path))
    write_atomic(result_path, json.dumps(result.to_dict()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
