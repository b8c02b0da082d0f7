"""A worker process that runs one case: ``python -m accelbench.worker SPEC.json RESULT.json``.

The parent (``isolation.py``) reads progress lines from this process's stdout and the result
from RESULT.json, so a crash, a hang or an out-of-memory kill here costs only this case.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PROGRESS_PREFIX = "@@accelbench-progress "


def main(argv: list[str]) -> int:
    spec_path, result_path = Path(argv[0]), Path(argv[1])
    spec = json.loads(spec_path.read_text())

    import torch

    from accelbench.devices import DeviceSet
    from accelbench.options import RunOptions
    from accelbench.runner import Case, run_case
    from accelbench.store.jsonfile import write_atomic
    from accelbench.userfile import load_workload_file

    options = RunOptions.from_dict(spec["options"])
    for path in options.workload_files:
        load_workload_file(Path(path))
    if options.threads:
        torch.set_num_threads(options.threads)
    fields = spec["case"]
    device = DeviceSet.current().select(fields.pop("device"))[0]
    case = Case(device=device, **fields)

    def progress(phase: str, done: float, total: float | None) -> None:
        print(PROGRESS_PREFIX + json.dumps([phase, done, total]), flush=True)

    result = run_case(case, options, progress)
    write_atomic(result_path, json.dumps(result.to_dict()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
