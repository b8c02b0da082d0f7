"""``accelbench compare A B [C ...] [--against SOURCE...]``: runs (history ids or result files) side
by side, and each of their results among shared results of the same work."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from accelbench.cli import optiongroups as groups
from accelbench.cli.common import add_json_argument, add_quiet_argument, say
from accelbench.cli.console import make_console
from accelbench.cli.history import add_db_option
from accelbench.compare import LabelledRun, compare_runs
from accelbench.errors import UsageError
from accelbench.render.compare_table import comparison_renderable, reference_renderable
from accelbench.render.fit import FittedTable, Prose
from accelbench.render.generation_detail import OVERALL_COLUMNS, overall_rows
from accelbench.render.json_views import comparison_json, comparison_view, dumps, peers_view
from accelbench.results import RunRecord
from accelbench.store.history import HistoryDB, default_db_path
from accelbench.store.jsonfile import load_record

if TYPE_CHECKING:
    from accelbench.sharing.against import Against


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("compare", help="compare runs; 'faster' only when significant")
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="run ids (or unique prefixes) from the history, or result JSON files")
    parser.add_argument("--reference", action="store_true",
                        help="add the built-in published results (alone: list them all)")
    parser.add_argument("--published", action="store_true",
                        help="the runs' generation cases beside the published batch-1 decode figures "
                        "of the same precision (llama.cpp, gpt-fast, torchao, PyTorch CI), read by "
                        "bandwidth share (alone: list them all)")
    add_json_argument(parser, "print what was compared and judged as JSON (the rows' figures, "
                      "each pair's ratio, verdict and interval)")
    groups.add_against_argument(parser)
    add_quiet_argument(parser, "no warnings about the --against sources and no line saying "
                       "what they held")
    add_db_option(parser)
    parser.set_defaults(execute=execute)


def place_against(runs: list[tuple[str, RunRecord]], sources: list[str], quiet: bool = False) -> Against:
    """Each finished timing case of ``runs`` among the sources' results, and each stored overall
    group (MLPerf Client's overall) among theirs; warnings go to stderr (not with ``quiet``)."""
    from accelbench.sharing.against import place_among
    from accelbench.store.selftest_latest import latest_selftest

    def warn(message: str) -> None:
        if not quiet:
            say(f"accelbench: warning: {message}")

    placed = place_among(runs, sources, warn, latest_selftest)
    if not placed.comparisons:
        raise UsageError("the runs given hold no finished timing case to place among shared results")
    return placed


def print_against(console: Console, runs: list[tuple[str, RunRecord]], sources: list[str],
                  quiet: bool = False) -> int:
    """The peers tables of ``place_against`` (the overall one where a stored overall group was
    placed) and, unless ``quiet``, what was read."""
    from accelbench.render.peers_table import overall_renderable, peers_renderable

    placed = place_against(runs, sources, quiet)
    console.print(peers_renderable(placed.comparisons))
    overall = overall_renderable(placed.overall)
    if overall is not None:
        console.print(overall)
    if not quiet:
        console.print(Prose(placed.loaded.summary(), "dim"))
    return 0


def _looks_like_file(spec: str) -> bool:
    return spec.endswith(".json") or "/" in spec or Path(spec).is_file()


def load_runs(specs: list[str], db_path: Path | None) -> list[LabelledRun]:
    """Each spec is a result file (when it names one) or a run id prefix in the history."""
    runs: list[LabelledRun] = []
    db: HistoryDB | None = None
    try:
        for spec in specs:
            if _looks_like_file(spec):
                record = load_record(Path(spec))
                label = Path(spec).name
            else:
                if db is None:
                    path = db_path or default_db_path()
                    if not path.exists():
                        raise UsageError(f"{spec!r} is not a result file, and there is no history "
                                         f"database at {path} to look it up in")
                    db = HistoryDB(path, create=False)
                record = db.get(spec)
                label = record.run_id
            runs.append(LabelledRun(label, record))
    finally:
        if db is not None:
            db.close()
    seen: dict[str, int] = {}
    unique = []
    for run in runs:
        # The same run (or two files with one name) given twice still needs distinct labels.
        seen[run.label] = seen.get(run.label, 0) + 1
        label = run.label if seen[run.label] == 1 else f"{run.label}#{seen[run.label]}"
        unique.append(LabelledRun(label, run.record))
    return unique


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    console = make_console()
    if args.against and not args.runs:
        raise UsageError("--against needs runs to place: give run ids or result files")
    for spec in args.runs:
        if groups.looks_like_source(spec):
            raise UsageError(f"{spec!r} is a source of shared results, not a run: place runs among "
                             f"it with --against {spec} (one source per --against)")
    if args.published:
        return _print_published(args)
    if not args.runs:
        if not args.reference:
            raise UsageError("give runs to compare (history ids or result files), or --reference")
        console.print(reference_renderable())
        return 0
    runs = load_runs(args.runs, args.db)
    comparisons = compare_runs(runs, with_reference=args.reference)
    if not comparisons:
        raise UsageError("the runs given hold no cases to compare")
    labelled = [(run.label, run.record) for run in runs]
    if args.json:
        if not args.against:
            sys.stdout.write(comparison_json(comparisons, labelled))
            return 0
        placed = place_against([(run.label, run.record) for run in runs], args.against, quiet=True)
        view: dict[str, Any] = {"against": peers_view(placed.comparisons, placed.loaded, placed.overall)}
        if len(runs) > 1 or args.reference:  # the comparison the table would have shown too
            view["comparisons"] = comparison_view(comparisons)
        sys.stdout.write(dumps(view))
        return 0
    if not args.against or len(runs) > 1 or args.reference:
        console.print(comparison_renderable(comparisons))
        overall = overall_rows(labelled)
        if overall:  # figures across cases, stored in each run (MLPerf Client's overall)
            console.print(FittedTable("Protocol figures across cases (stored with each run)",
                                      OVERALL_COLUMNS, overall, right=OVERALL_COLUMNS[2:]))
    if args.against:
        return print_against(console, [(run.label, run.record) for run in runs], args.against,
                             args.quiet)
    return 0


def _print_published(args: argparse.Namespace) -> int:
    """``compare --published``: generation beside the field's published decode rows."""
    from accelbench.render.published_generation import published_generation, published_view

    console = make_console()
    runs = load_runs(args.runs, args.db) if args.runs else []
    if args.runs and not any(c.mode == "generate" for run in runs for c in run.record.cases):
        raise UsageError("--published places generation cases (--mode generate); the runs given "
                         "hold none")
    labelled = [(run.label, run.record) for run in runs]
    if args.json:  # the table's rows, each of yours with its decode bound and recipe
        sys.stdout.write(dumps(published_view(labelled)))
        return 0
    console.print(published_generation(labelled))
    return 0

