"""``accelbench share [RUN...] -o FILE | --push TARGET``: stored runs as a bundle that is safe to post
publicly, written to a file or submitted to a hub (a Hugging Face dataset, a folder, a git checkout)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from accelbench.cli.common import add_json_argument, add_quiet_argument, say
from accelbench.cli.compare import load_runs
from accelbench.cli.history import add_db_option, open_db
from accelbench.errors import UsageError
from accelbench.files import write_atomic
from accelbench.store.history import default_db_path
from accelbench.store.jsonfile import check_writable


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("share", help="write stored runs as a bundle others can compare against")
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="run ids (or prefixes) or result files (default: every timing run in "
                        "the history)")
    parser.add_argument("--output", "-o", type=Path, metavar="FILE.jsonl",
                        help="the bundle to write (JSON lines)")
    parser.add_argument("--push", metavar="TARGET",
                        help="submit the bundle: hf://datasets/ORG/NAME opens a pull request on the "
                        "dataset; a folder (or a git checkout: added and committed, not pushed) gets "
                        "the file; shows what will be sent and asks first")
    parser.add_argument("--yes", "-y", action="store_true",
                        help="with --push: send without asking (for scripts)")
    parser.add_argument("--dry-run", action="store_true",
                        help="show what would be shared (a line of the table per result), and write "
                        "or send nothing; with --json, the bundle's lines exactly")
    add_json_argument(parser, "with --dry-run: print the bundle's lines exactly as they would be "
                      "written (JSON lines)")
    add_quiet_argument(parser, "no notes on what was left out and no line saying what was written")
    parser.add_argument("--with-samples", action="store_true",
                        help="also share the raw step times (larger; summaries are shared anyway)")
    parser.add_argument("--new-machine-id", action="store_true",
                        help="make a new signing key and machine id for this install before sharing")
    parser.add_argument("--protocol", metavar="NAME",
                        help="share only the generation cases run under this --protocol "
                        "(llama-bench, gpt-fast, mlperf-client)")
    add_db_option(parser)
    parser.set_defaults(execute=execute)


def _stored_runs(db: Path | None) -> list[str]:
    path = db or default_db_path()
    if not path.exists():
        raise UsageError(f"no runs given and no history database at {path}; give RUN ids or result files")
    with open_db(path) as history:
        ids = [row.run_id for row in history.list_runs(kind="run")]
    if not ids:
        raise UsageError(f"no runs given and the history at {path} holds no timing runs")
    return ids


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from accelbench.hub.push import check_target
    from accelbench.sharing.build import build_bundle
    from accelbench.sharing.machine_id import identity, stored_machine_id
    from accelbench.sharing.signing import SIGNING_HELP
    from accelbench.store.selftest_latest import latest_selftest

    if args.json and not args.dry_run:
        raise UsageError("--json prints the lines a --dry-run would share; add --dry-run (or write "
                         "them with -o FILE.jsonl)")
    if args.output is None and args.push is None and not args.dry_run:
        raise UsageError("give the bundle file to write with -o FILE.jsonl, a hub with --push TARGET, "
                         "or --dry-run to see it")
    if args.output is not None and not args.dry_run:
        check_writable(args.output)
    if args.push is not None:
        check_target(args.push)
        if not args.yes and not args.dry_run and not sys.stdin.isatty():
            raise UsageError("--push shows what will be sent and asks first, and there is no terminal to "
                             "ask on: add --yes to send without asking")
    runs = load_runs(list(args.runs) or _stored_runs(args.db), args.db)
    # A dry run writes nothing, not even a new (or first) machine id: it shows the id it would use.
    machine, signer = identity(new=args.new_machine_id, store=not args.dry_run)
    records = [run.record for run in runs]
    if args.protocol:
        records = protocol_cases(records, args.protocol)
    bundle = build_bundle(records, machine,
                          selftest=latest_selftest, with_samples=args.with_samples)
    if signer is not None:
        bundle.lines = [signer.sign_line(line) for line in bundle.lines]
    notes = [*bundle.skipped, *([] if signer is not None or not bundle.lines else
                               [f"lines not signed (a hub counts them apart): {SIGNING_HELP}"])]
    for note in [] if args.quiet else notes:
        say(f"accelbench: note: {note}")
    if not bundle.lines:
        raise UsageError("nothing to share: the runs given hold no timing cases")
    if args.dry_run:
        if args.push is not None:
            return _push(args.push, bundle.text(), machine, dry_run=True, yes=True)
        _show_dry_run(bundle.text(), machine, args.json)
        stored = ("a new id, not stored: sharing for real draws its own"
                  if args.new_machine_id or stored_machine_id() is None else "this install's id")
        if not args.quiet:
            say(f"dry run: {len(bundle.lines)} result(s) would be shared as machine {machine} "
                f"({stored}); nothing written")
        return 0
    if args.output is not None:
        write_atomic(args.output, bundle.text())
        if not args.quiet:
            say(f"{len(bundle.lines)} result(s) from {len(runs)} run(s) written to {args.output}")
    if args.push is not None:
        return _push(args.push, bundle.text(), machine, dry_run=False, yes=args.yes)
    return 0


def _show_dry_run(text: str, machine: str, as_json: bool) -> None:
    """The bundle's lines exactly (``--json``), or a table of them and their main fields."""
    if as_json:
        sys.stdout.write(text)
        return
    from accelbench.cli.console import make_console
    from accelbench.hub.push import submission
    from accelbench.render.submission import dry_run_renderable

    make_console().print(
        dry_run_renderable(submission(text, machine)))


def protocol_cases(records: list[Any], name: str) -> list[Any]:
    """The records with only their cases run under ``--protocol name`` (a bad name: usage)."""
    import dataclasses

    from accelbench.workloads.protocols import protocol

    protocol(name)
    return [dataclasses.replace(record, cases=[c for c in record.cases if c.protocol == name])
            for record in records]


def _push(target: str, text: str, machine: str, *, dry_run: bool, yes: bool) -> int:
    """Show what will be sent, ask (unless ``yes``), send."""
    from accelbench.cli.console import make_console
    from accelbench.hub.push import push, submission
    from accelbench.render.submission import submission_renderable

    sub = submission(text, machine)
    make_console().print(submission_renderable(target, sub))
    if dry_run:
        say(f"dry run: {sub.lines} result(s) would be sent to {target}; nothing sent")
        return 0
    if not yes:
        sys.stdout.write(f"Send {sub.lines} result(s) to {target}? [y/N] ")
        sys.stdout.flush()
        answer = sys.stdin.readline().strip().casefold()
        if answer not in ("y", "yes"):  # a choice, not a failure
            sys.stderr.write("nothing sent\n")
            return 0
    sys.stderr.write(push(target, sub) + "\n")
    return 0
