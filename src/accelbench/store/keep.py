"""Keep a finished record everywhere it belongs: the results folder and the history database."""

from __future__ import annotations

from pathlib import Path

from accelbench.results import RunRecord
from accelbench.store.jsonfile import save_to_results_dir


def store_everywhere(record: RunRecord) -> Path:
    """Save the record's JSON file (always) and add it to the history database; return the path."""
    saved = save_to_results_dir(record)
    return saved
