"""Run a user's Python file: workloads (``--workload-file``, registered with @register and
loaded by ``catalogue.load_workload_file``) or probe features (``probe --feature-file``,
registered with ``register_feature``)."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path

from accelbench.errors import UsageError


def run_user_file(path: Path, what: str) -> str:
    """Execute ``path`` as a module and return its module name; every problem is a one-line
    UsageError naming the ``what`` ("workload file") and the line."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{what} {path} does not exist")
    module_name = f"accelbench_user_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{what} {path} cannot be loaded as Python (use a .py file)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        raise UsageError(f"{what} {path}: syntax error at line {error.lineno}: "
                         f"{error.msg}") from None
    except UsageError as error:  # e.g. a class that breaks the workload contract
        line = _user_line(traceback.extract_tb(error.__traceback__), path)
        raise UsageError(f"{what} {path}{line}: {error}") from None
    except Exception as error:
        line = _user_line(traceback.extract_tb(error.__traceback__), path)
        raise UsageError(f"{what} {path}: {type(error).__name__} while importing"
                         f"{line}: {error}") from None
    return module_name


def _user_line(frames: traceback.StackSummary, path: Path) -> str:
    for frame in reversed(frames):
        if Path(frame.filename).resolve() == path.resolve():
            return f" (line {frame.lineno})"
    return ""
