"""Sharing results: bundles others can compare against (``accelbench share``), and the sources
they are read back from (``compare --against``, ``run --against``, ``site``).

    bundle.py      the format: JSON lines, versioned per line, content hash, what a bad line is
    build.py       a bundle from stored runs, field by field (the privacy rule)
    privacy.py     the check that no string naming the sharer or the host leaves
    machine_id.py  the random per-install id that groups one machine's results
    peer_view.py   a bundle line as a peer (key, device model, throughput, settings)
    plausible.py   whether a line is possible on its own machine (limits, its own TTFT/TPOT, tokens)
    sources.py     file, folder, http(s) and Hugging Face sources, with per-line warnings
    shards.py      Parquet shards of a compacted hub: columns, layout, the DuckDB relation
    query.py       what compare --against, site and hub aggregate read of shards, in SQL
    bands.py       aggregate tables (compare --against FILE), and the shipped published one
    against.py     compare --against / run --against: the user's cases among the sources
"""
