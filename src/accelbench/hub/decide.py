"""What ``hub compact`` decides over everything it read, in SQL (the rows staged by ``compact.py``):
which lines are one result, which conflict, which are forged, which machines are outliers.

The rules are those of the JSON-lines path, applied to a hub at once (tests hold the two paths to
the same answers):

* duplicates: the same content hash (the first met is kept, whatever it is: the lines are equal);
  then the same machine, case and measurement (``sharing/conflicts.measurement``: key, device
  model and rate; a case shared again after its validity changed);
* forged: an unsigned line under a machine id that a signed line holds (``sharing/signing.py``;
  every signature was verified as the line was read);
* conflicts: one machine and case with different measurements: each kept, quarantined with
  ``compare/outliers.CONFLICT``, none preferred (which was first is the submitter's choice);
* outliers: ``compare/outliers``'s median/MAD rule per key and device model, over machines.
"""

from __future__ import annotations

import math
from typing import Any

from accelbench.compare.outliers import (
    CONFLICT,
    MAD_LIMIT,
    MAD_SCALE,
    MIN_FACTOR,
    OUTLIER_MIN_MACHINES,
    outlier_reason,
)
from accelbench.results.key import KEY_FIELDS
from accelbench.sharing.shards import NO_MACHINE
from accelbench.sharing.signing import FORGED_ID


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def settle(connection: Any) -> list[tuple[Any, ...]]:
    """Rank the staged rows; leave the rows kept in ``kept_seq`` (seq, conflict); the refused
    lines as (source, line, reason, message)."""
    connection.execute("""
        CREATE TEMP TABLE ranked AS SELECT seq, source, line_no, hash, machine_id, case_id,
            key_id || chr(0) || device_model || chr(0) || CAST(rate AS VARCHAR) AS measurement, signed,
            first_value(source) OVER h AS hash_source, first_value(line_no) OVER h AS hash_line,
            row_number() OVER h AS hash_rank FROM staged
        WINDOW h AS (PARTITION BY hash ORDER BY seq)""")
    connection.execute("""
        CREATE TEMP TABLE forged AS SELECT seq, source, line_no FROM ranked
        WHERE hash_rank = 1 AND NOT signed
          AND machine_id IN (SELECT machine_id FROM ranked WHERE signed)""")
    connection.execute("""
        CREATE TEMP TABLE case_ranked AS SELECT r.seq, r.source, r.line_no, g.measurements,
            first_value(r.source) OVER m AS case_source, first_value(r.line_no) OVER m AS case_line,
            row_number() OVER m AS case_rank
        FROM ranked r JOIN (SELECT machine_id, case_id, count(DISTINCT measurement) AS measurements
                            FROM ranked WHERE hash_rank = 1 AND seq NOT IN (SELECT seq FROM forged)
                            GROUP BY ALL) g USING (machine_id, case_id)
        WHERE r.hash_rank = 1 AND r.seq NOT IN (SELECT seq FROM forged)
        WINDOW m AS (PARTITION BY r.machine_id, r.case_id, r.measurement ORDER BY r.seq)""")
    connection.execute("CREATE TEMP TABLE kept_seq AS SELECT seq, measurements > 1 AS conflict "
                       "FROM case_ranked WHERE case_rank = 1")
    return connection.execute(f"""
        SELECT source, line_no, 'duplicate' AS reason,
               'same content hash as ' || hash_source || ' line ' || hash_line AS message
        FROM ranked WHERE hash_rank > 1
        UNION ALL
        SELECT source, line_no, 'duplicate', 'same machine, run and case as ' || case_source || ' line '
               || case_line FROM case_ranked WHERE case_rank > 1
        UNION ALL
        SELECT source, line_no, {_literal(FORGED_ID)},
               'unsigned, under the id of a machine that signs its lines (forged)' FROM forged
        ORDER BY source, line_no""").fetchall()


def quarantine(connection: Any, keys: str) -> None:
    """The temporary table ``quarantined`` (key, device model, machine, reason): the machines far
    above their device model, by ``compare/outliers``'s rule and words."""
    flagged = connection.execute(f"""
        WITH machines AS (
            SELECT {keys}, model_key, machine_id, ln(median(rate)) AS value FROM kept
            WHERE implausible = '' AND outlier = '' AND NOT starts_with(machine_id, '{NO_MACHINE}')
            GROUP BY ALL),
        centres AS (
            SELECT {keys}, model_key, count(*) AS machines, median(value) AS centre FROM machines
            GROUP BY ALL HAVING count(*) >= {OUTLIER_MIN_MACHINES}),
        spreads AS (
            SELECT {keys}, model_key, any_value(c.machines) AS machines, any_value(c.centre) AS centre,
                   median(abs(m.value - c.centre)) AS mad
            FROM machines m JOIN centres c USING ({keys}, model_key) GROUP BY ALL),
        spellings AS (
            SELECT {keys}, model_key, min(device_model) AS spelling FROM kept
            WHERE implausible = '' AND outlier = '' AND NOT starts_with(machine_id, '{NO_MACHINE}')
            GROUP BY ALL)
        SELECT m.*, s.machines, s.centre, s.centre + greatest({MAD_LIMIT * MAD_SCALE!r} * s.mad,
               {math.log(MIN_FACTOR)!r}) AS limit_value, p.spelling
        FROM machines m JOIN spreads s USING ({keys}, model_key) JOIN spellings p USING ({keys}, model_key)
        WHERE m.value > s.centre + greatest({MAD_LIMIT * MAD_SCALE!r} * s.mad, {math.log(MIN_FACTOR)!r})
        """).fetchall()
    columns = [d[0] for d in connection.description]
    records = []
    for row in flagged:
        data = dict(zip(columns, row, strict=True))
        records.append({**{name: data[name] for name in KEY_FIELDS}, "model_key": data["model_key"],
                        "machine_id": data["machine_id"],
                        "reason": outlier_reason(math.exp(data["limit_value"]), math.exp(data["centre"]),
                                                 data["machines"], data["spelling"])})
    if not records:
        connection.execute(f"CREATE TEMP TABLE quarantined AS SELECT {keys}, model_key, machine_id, "
                           "'' AS reason FROM kept WHERE FALSE")
        return
    import pyarrow as pa

    connection.register("quarantined_rows", pa.Table.from_pylist(records))
    connection.execute("CREATE TEMP TABLE quarantined AS SELECT * FROM quarantined_rows")


def kept_view(connection: Any) -> None:
    """The view ``kept``: the staged rows kept, a conflict's quarantine in its ``outlier`` column."""
    connection.execute(f"CREATE TEMP VIEW kept AS SELECT s.* REPLACE (CASE WHEN k.conflict THEN "
                       f"{_literal(CONFLICT)} ELSE s.outlier END AS outlier) "
                       "FROM staged s JOIN kept_seq k USING (seq)")

