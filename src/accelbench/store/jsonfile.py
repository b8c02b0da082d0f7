"""Result files: written atomically (temporary file + rename), read with validation, never pickle."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError
from accelbench.files import data_home, write_atomic
from accelbench.results import RunRecord


def clean_for_json(value: Any) -> Any:
    """JSON has no NaN or Infinity: store them as null rather than write invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean_for_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_for_json(v) for v in value]
    return value


def check_writable(path: Path) -> None:
    """Fail early, before a long run, when ``path`` cannot be written."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"output path {path} is a folder; give a file name like results.json")
    if not folder.is_dir():
        raise UsageError(f"cannot write {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"cannot write {path}: permission denied")


def results_dir() -> Path:
    return data_home() / "results"


def save_record(record: RunRecord, path: Path) -> Path:
    write_atomic(Path(path), json.dumps(clean_for_json(record.to_dict()), indent=1) + "\n")
    return Path(path)


def save_to_results_dir(record: RunRecord) -> Path:
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = record.created_at.replace(":", "").replace("-", "").replace("+0000", "Z")
    return save_record(record, folder / f"{stamp}-{record.kind}-{record.run_id}.json")


def load_record(path: Path) -> RunRecord:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"result file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read result file {path}: {error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"result file {path} is not valid JSON (truncated or corrupt?): "
                         f"{error.msg} at line {error.lineno}") from None
    try:
        return RunRecord.from_dict(data)
    except UsageError as error:
        raise UsageError(f"{path}: {error}") from None
    except (TypeError, ValueError, KeyError) as error:
        raise UsageError(f"{path}: malformed result ({type(error).__name__}: {error})") from None
