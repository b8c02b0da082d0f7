"""The per-user data folder (``ACCELBENCH_HOME`` overrides it, e.g. for tests)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def data_home() -> Path:
    override = os.environ.get("ACCELBENCH_HOME")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_data_dir("accelbench", appauthor=False))


def results_dir() -> Path:
    return data_home() / "results"
