"""The hub: a shared place for results that grows (issue 29).

    push.py       share --push: a bundle to a Hugging Face dataset (a pull request) or a folder / git
                  checkout, one file per submission under a path that keeps folders small
    compact.py    hub compact: bundles to Parquet shards by mode and device class, each line's hash
                  and signature verified, duplicates dropped, refused lines listed with their reasons
    decide.py     what compaction decides over everything, in SQL: duplicates, forged lines,
                  conflicts, outliers
    aggregate.py  hub aggregate: per key and device class, machines, percentiles 1-99, dates

Reading shards and aggregate tables is ``sharing/``'s (compare --against and site read them).
"""
