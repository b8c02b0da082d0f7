"""Keep a finished record everywhere it belongs: the results folder and the history database."""

from __future__ import annotations

import sys
from pathlib import Path

from accelbench.errors import UsageError
from accelbench.results import RunRecord
from accelbench.store.jsonfile import save_to_results_dir

#: A run waits this long for another accelbench process that is writing the database.
HISTORY_LOCK_TIMEOUT_S = 30.0


def store_everywhere(record: RunRecord, db_path: Path | None = None) -> Path:
    """Save the record's JSON file (always) and add it to the history database; return the path.

    A history database that cannot be written (corrupt, locked too long, newer schema) costs a
    warning, never the finished benchmark: the JSON file is already saved and can be imported.
    """
    saved = save_to_results_dir(record)
    from accelbench.store.history import HistoryDB

    try:
        with HistoryDB(db_path, lock_timeout_s=HISTORY_LOCK_TIMEOUT_S) as history:
            history.add_record(record)
    except UsageError as error:
        sys.stderr.write(f"accelbench: warning: not stored in the history database: {error}; "
                         f"import it later with 'accelbench import {saved}'\n")
    return saved
