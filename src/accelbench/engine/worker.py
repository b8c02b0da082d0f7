"""A worker process that runs one case: ``python -m accelbench.engine.worker SPEC.json RESULT.json``.

The spec's ``work`` ("run", "check", "probe") names the subcommand's per-case function (see
``accelbench.engine.launch.WORKER_FUNCTIONS``). The parent reads progress lines from this
process's stdout and the result from RESULT.json, so a crash, a hang or an out-of-memory kill
here costs only this case.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from accelbench.engine.launch import Report, worker_function
    from accelbench.files import write_atomic

    spec_path, result_path = Path(argv[0]), Path(argv[1])
    spec = json.loads(spec_path.read_text())
    work = worker_function(spec.get("work", "run"))
    result = work(spec, Report(result_path))
    write_atomic(result_path, json.dumps(result.to_dict()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
