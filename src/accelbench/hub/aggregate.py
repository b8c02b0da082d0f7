"""``accelbench hub aggregate SOURCE... -o FILE``: a collection's bands (``compare/bands.py``) as a
small table that places a result offline (``compare --against FILE``, ``sharing/bands.py``).

Bundles are read as ``compare --against`` reads them (every line verified, duplicates counted
once, implausible lines and the outliers of each device class left out); Parquet shards are
aggregated in place through DuckDB. A band is written only for a key and device class (and, for
a generation key, decode bound class: ``compare/bands.py``) that at least
``compare.bands.MIN_MACHINES`` machines measured. What was read and kept apart is counted as
``compare --against`` counts it (``query.count_read``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelbench.compare.bands import MIN_MACHINES, Band, bands_of
from accelbench.sharing.bands import table_dict, write_table
from accelbench.sharing.query import collection_relation, count_read, shard_bands
from accelbench.sharing.shards import duckdb_connection
from accelbench.sharing.sources import Loaded, load_collection

Warn = Callable[[str], None]


def aggregate(specs: list[str], out: Path, warn: Warn,
              min_machines: int = MIN_MACHINES) -> tuple[list[Band], Loaded]:
    """Write the bands of ``specs`` to ``out``; the bands and what was read."""
    loaded, files = load_collection(specs, warn)
    if files:
        connection = duckdb_connection(" ".join(specs))
        rel = collection_relation(connection, files, loaded.peers, loaded=loaded, warn=warn)
        bands = shard_bands(connection, rel, min_machines)
        count_read(connection, rel, loaded)
        connection.close()
    else:
        bands = bands_of(loaded.peers, min_machines)
    table: dict[str, Any] = table_dict(bands, list(specs), min_machines)
    write_table(out, table)
    return bands, loaded
