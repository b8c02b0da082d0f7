"""A worker process that runs one case: ``python -m accelbench.engine.worker SPEC.json RESULT.json``
(or one rank of a torchrun launch: ``python -m accelbench.engine.worker --rank SPEC.json``).

The spec's ``work`` names the subcommand's own per-case function (``module:function``, see
``accelbench.engine.case.WorkerSpec``). The parent reads progress lines from this
process's stdout and the result from RESULT.json, so a crash, a hang or an out-of-memory kill
here costs only this case.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from accelbench.engine.case import WorkerSpec
    from accelbench.engine.launch import Report, worker_function
    from accelbench.files import write_atomic

    if argv[0] == "--rank":  # one rank under torchrun: the work writes its own report
        spec = WorkerSpec.from_json(Path(argv[1]).read_text())
        return int(worker_function(spec.work)(spec))
    spec_path, result_path = Path(argv[0]), Path(argv[1])
    spec = WorkerSpec.from_json(spec_path.read_text())
    work = worker_function(spec.work)
    result = work(spec, Report(result_path))
    write_atomic(result_path, json.dumps(result.to_dict()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
