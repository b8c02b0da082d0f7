"""What reading shared results gave (``sources.load_peers``, ``sources.load_collection``): the
peers, and every line accounted for, in one summary line that ``compare --against``, its
``--json``, ``site`` and ``hub aggregate`` all print."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from accelbench.compare.outliers import CONFLICT, OUTLIER_RULE
from accelbench.compare.peers import PeerResult


@dataclass
class Loaded:
    """What the sources gave: the peers, and every line accounted for: bundle lines read (used,
    or of other work and passed over), bundle lines skipped by reason, duplicates, and lines that
    are not accelbench bundle lines at all."""

    peers: list[PeerResult] = field(default_factory=list)
    #: Bundle lines read and usable.
    lines: int = 0
    #: Bundle lines of other work (a caller's keys given), passed over after their hash check.
    other_work: int = 0
    #: Results used that carry no signature (``signing.py``), counted apart.
    unsigned: int = 0
    #: Bundle lines that could not be used, by reason (bundle.py's and peer_view.py's kinds).
    skipped: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    #: Lines that are not accelbench bundle lines (no "bundle" member: a web page, random bytes).
    not_bundle: int = 0
    sources: list[str] = field(default_factory=list)
    #: Parquet shards read through DuckDB, and the rows of them that were read (the work asked for).
    shard_files: int = 0
    shard_rows: int = 0
    #: Aggregate tables a result was placed in (nothing of them is a result read).
    tables: int = 0
    #: Shard rows of the work read that were kept apart (``hub compact`` decided them), and of the
    #: quarantined those in conflict.
    shard_invalid: int = 0
    shard_outliers: int = 0
    shard_conflicts: int = 0
    #: The case each bundle result is (content hash -> ``sources.case_identity``; none for a result
    #: without a machine id), so that a shard row and a bundle line of one case are compared.
    cases: dict[str, str] = field(default_factory=dict, repr=False)
    #: The content hashes of the bundle results that are signed.
    signed: set[str] = field(default_factory=set, repr=False)

    @property
    def invalid(self) -> int:
        return self.shard_invalid + sum(peer.results for peer in self.peers if peer.invalid)

    @property
    def outliers(self) -> int:
        """Results quarantined: outliers of their device model and lines in conflict (``conflicts``
        says how many of them), the count every placement of the same work shows."""
        return self.shard_outliers + sum(peer.results for peer in self.peers
                                         if peer.outlier and not peer.invalid)

    @property
    def conflicts(self) -> int:
        """Of the results quarantined, the lines of one machine and case whose figures disagree
        (``CONFLICT``): from the bundles (``conflicts.resolve``) and from the shards alike."""
        return self.shard_conflicts + sum(peer.results for peer in self.peers
                                          if peer.outlier == CONFLICT and not peer.invalid)

    def count_shards(self, rows: int, invalid: int, outliers: int, conflicts: int) -> None:
        """What the shards added, from the counts over the shards and the bundle results together
        (``query.count_read``: ``shards.COUNTS_SQL`` over the relation read)."""
        self.shard_rows = self.shard_invalid = self.shard_outliers = self.shard_conflicts = 0
        self.shard_rows = rows - sum(peer.results for peer in self.peers)
        self.shard_invalid, self.shard_outliers, self.shard_conflicts = (
            invalid - self.invalid, outliers - self.outliers, conflicts - self.conflicts)

    def summary(self) -> str:
        """One line saying what was read and what was left out, and why."""
        words = [f"read {self.lines:,} shared result(s) from {len(self.sources) - self.tables} source(s)"]
        if self.other_work:
            words.append(f"{self.other_work:,} line(s) of other work passed over (their content hash "
                         "checked)")
        if self.shard_files:
            words[0] += (f" and {self.shard_rows:,} from {self.shard_files:,} Parquet shard(s) (read in "
                         "place through DuckDB)")
        if self.tables:
            words.append(f"placed in the bands of {self.tables} aggregate table(s), offline")
        if self.skipped:
            words.append(lines_by_reason("skipped", self.skipped))
        if self.not_bundle:
            words.append(f"skipped {self.not_bundle:,} line(s) that are not accelbench bundle lines")
        if self.duplicates:
            words.append(f"{self.duplicates:,} duplicate(s) counted once")
        if self.unsigned:
            words.append(f"{self.unsigned:,} unsigned")
        if self.invalid:
            words.append(f"{self.invalid:,} flagged invalid (implausible on their own machine; kept out "
                         "of every band)")
        if self.outliers:
            words.append(quarantined_words(self.outliers, self.conflicts))
        return "; ".join(words)


def lines_by_reason(verb: str, reasons: Counter[str]) -> str:
    """'skipped N bundle line(s) (2 a reason, 1 another)': lines left out, by reason, most first."""
    named = ", ".join(f"{count:,} {reason}" for reason, count in reasons.most_common())
    return f"{verb} {sum(reasons.values()):,} bundle line(s) ({named})"


def quarantined_words(quarantined: int, conflicts: int) -> str:
    """'12 quarantined, kept out of every band (2 in conflict: ...; 10 more than ...)': the one
    wording of the summaries of compare --against, site, hub aggregate and hub compact."""
    parts = [f"{conflicts:,} in conflict: one machine and case with other figures"] if conflicts else []
    if quarantined > conflicts:
        parts.append(f"{quarantined - conflicts:,} {OUTLIER_RULE}")
    return f"{quarantined:,} quarantined, kept out of every band ({'; '.join(parts)})"
