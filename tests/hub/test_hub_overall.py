"""Issue 33, one truth for each protocol's figure: ``hub compact`` keeps the figures across cases
a line carries (MLPerf Client's overall geometric means, stored with its run: shard version 4's
overall columns), signed lines still verify through compaction, and a site from the shards shows
the same overall table as a site from the bundles; shards from before the columns read as
carrying none. Real bundles (the ``share`` code, the real signer), the real compaction, DuckDB."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_history_overall import planted

from accelbench.render.format import format_rate, format_seconds
from accelbench.render.site import slug
from accelbench.sharing.build import build_bundle
from accelbench.sharing.query import read_collection
from accelbench.sharing.shards import OVERALL_COLUMNS, duckdb_connection, shard_files
from accelbench.sharing.signing import Signer, can_sign

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")
pytestmark = pytest.mark.skipif(not can_sign(), reason="hub compact verifies signatures: cryptography")

BENCH = f"bench-{slug('llama-1b generate fp32')}.html"
SLOW = {"mlperf_ttft_geomean_s": 0.2, "mlperf_token_rate_geomean": 1000.0}


def _hub(tmp_path: Path) -> tuple[Path, int]:
    """Two machines' bundles: one signed (planted figures), one unsigned (SLOW); and the line count."""
    folder = tmp_path / "hub"
    folder.mkdir()
    signer = Signer.generate()
    fast = build_bundle([planted("run-a")], signer.machine_id).lines
    (folder / "a.jsonl").write_text("".join(signer.sign_line(line) + "\n" for line in fast))
    slow = planted("run-b")
    slow.protocol_overall = [replace(group, **SLOW) for group in slow.protocol_overall or []]
    other = build_bundle([slow], "b" * 32)
    (folder / "b.jsonl").write_text(other.text())
    return folder, len(fast) + len(other.lines)


def _compact(inline_cli: Any, source: Path, out: Path) -> None:
    done = inline_cli("hub", "compact", str(source), "-o", str(out), "--workers", "1")
    assert done.returncode == 0, done.stderr


def _overall_section(page: str) -> str:
    start = page.index(": overall")
    return page[start:page.index("</table>", start)]


def test_compaction_keeps_the_figures_and_a_site_from_shards_reads_them_alike(inline_cli: Any,
                                                                              tmp_path: Path) -> None:
    folder, lines = _hub(tmp_path)
    shards = tmp_path / "shards"
    _compact(inline_cli, folder, shards)
    connection = duckdb_connection("test")
    try:
        files = f"read_parquet('{shards}/**/*.parquet')"
        total, signed = connection.execute(
            f"SELECT count(*), count(*) FILTER (signed) FROM {files}").fetchone()
        carried = set(connection.execute(
            f"SELECT overall_ttft_s, overall_token_rate, count(*) FROM {files} "
            "WHERE overall_group <> '' GROUP BY ALL").fetchall())
    finally:
        connection.close()
    assert total == lines and signed == lines // 2  # every line kept; the signed ones verified
    (group,) = planted().protocol_overall or []
    categories = len(group.categories)  # each group's lines: one per category
    assert carried == {(0.0777, 12345.6, categories), (0.2, 1000.0, categories)}
    from_shards, _ = read_collection([str(shards)], lambda message: None)
    from_bundles, _ = read_collection([str(folder)], lambda message: None)
    assert from_shards.overall == from_bundles.overall
    ((summary,),) = from_shards.overall.values()
    assert (summary.groups, summary.machines) == (2, 2)
    assert summary.token_rate == pytest.approx((12345.6 + 1000.0) / 2)
    pages = {}
    for name, source in (("bundles", folder), ("shards", shards)):
        done = inline_cli("site", str(source), "-o", str(tmp_path / name), "--quiet")
        assert done.returncode == 0, done.stderr
        pages[name] = _overall_section((tmp_path / name / BENCH).read_text())
    assert pages["shards"] == pages["bundles"]
    assert format_seconds(summary.ttft_s) in pages["shards"]
    assert f"{format_rate(summary.token_rate)} tokens/s" in pages["shards"]


def test_shards_from_before_the_overall_columns_read_as_carrying_none(inline_cli: Any,
                                                                      tmp_path: Path) -> None:
    folder, _ = _hub(tmp_path)
    shards, old = tmp_path / "shards", tmp_path / "old"
    _compact(inline_cli, folder, shards)
    dropped = ", ".join(OVERALL_COLUMNS)
    connection = duckdb_connection("test")
    try:
        for path in shard_files(shards):
            target = old / path.relative_to(shards)
            target.parent.mkdir(parents=True, exist_ok=True)
            connection.execute(f"COPY (SELECT * EXCLUDE ({dropped}) FROM read_parquet('{path}')) "
                               f"TO '{target}' (FORMAT parquet)")
    finally:
        connection.close()
    collection, _ = read_collection([str(old)], lambda message: None)
    current, _ = read_collection([str(shards)], lambda message: None)
    assert collection.overall == {} and current.overall  # no columns: none carried, no error
    assert collection.keys == current.keys and collection.results == current.results
