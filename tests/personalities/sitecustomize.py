"""Installs the hardware personality named by ``ACCELBENCH_TEST_PERSONALITY`` in every Python
process started with this folder on ``PYTHONPATH`` (the CLI, accelbench's worker processes,
torchrun and its ranks), then runs the ``sitecustomize`` this one shadows (Debian's python has
one in its standard library folder). Without the variable nothing is imported: no torch.

A personality that fails to install stops the process (exit code 70) instead of letting it run
on the bare machine, which would pass tests for the wrong reason.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is not None and spec.loader is not None and spec.origin \
                and os.path.abspath(spec.origin) != os.path.abspath(__file__):
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


if os.environ.get("ACCELBENCH_TEST_PERSONALITY"):
    try:
        import accelbench_personalities

        accelbench_personalities.install_from_env()
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.write("accelbench test personality failed to install; stopping\n")
        sys.stderr.flush()
        os._exit(70)
_shadowed()
