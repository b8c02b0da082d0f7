"""``accelbench probe``: which features work on each device. Exits 0 when probing ran: a feature
that fails is a finding, not an error."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.cli import optiongroups as groups
from accelbench.cli.common import add_json_argument, add_saving_arguments
from accelbench.cli.console import make_console
from accelbench.cli.driven import run_driven, show_record
from accelbench.devices import DeviceSet
from accelbench.errors import UsageError
from accelbench.options.probe import ProbeOptions
from accelbench.options.recorded import RecordedProbe
from accelbench.results import RunRecord
from accelbench.store.jsonfile import check_writable

#: ``--debug`` (cli.build_parser) also shows the tracebacks of failing probes.
DEBUG_HELP = "show tracebacks, also of failing probes"

if TYPE_CHECKING:
    from accelbench.probes import Feature


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("probe", help="which features work on each device")
    groups.add_device_argument(parser, "all", "default: all")
    parser.add_argument("--feature", action="append", metavar="PATTERN",
                        help="probe only the features matching this wildcard, e.g. fft or 'sdpa:*' "
                        "(repeatable; see --list)")
    parser.add_argument("--skip-compile", action="store_true",
                        help="skip the torch.compile probes (inductor can take a minute on a CPU)")
    parser.add_argument("--feature-file", type=Path, action="append", default=[], metavar="FILE.py",
                        help="load your own features (registered with "
                        "accelbench.probes.register_feature)")
    groups.add_isolation_arguments(
        parser, auto_batch=False, schedule=False, sizes=False,
        isolation_help="probe each device in worker processes (a feature that crashes costs only "
        "its own cell) or inline",
        timeout_help="stop a device's worker after this long: the feature it was running is "
        "'timeout' and a fresh worker goes on")
    parser.add_argument("--list", action="store_true", help="list the features and exit")
    add_json_argument(parser)
    add_saving_arguments(parser)
    parser.set_defaults(execute=execute)


def chosen_features(patterns: list[str] | None, skip_compile: bool) -> list[Feature]:
    from accelbench.probes.features import all_features, select_features

    features = all_features()
    try:
        chosen = select_features(features, patterns, ("compile",) if skip_compile else ())
    except LookupError as error:
        raise UsageError(f"no feature matches {error.args[0]!r}; known features: "
                         f"{', '.join(f.name for f in features)}") from None
    if not chosen:
        raise UsageError("nothing to probe: --skip-compile removed every feature --feature chose")
    return chosen


def options_from_args(args: argparse.Namespace) -> ProbeOptions:
    return ProbeOptions(device=args.device, feature_patterns=tuple(args.feature or ()),
                        skip_compile=args.skip_compile,
                        feature_files=tuple(str(path) for path in args.feature_file),
                        isolation=args.isolation, case_timeout=args.case_timeout, debug=args.debug)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    options = options_from_args(args)
    # torch: only once the command runs, not to build its parser
    from accelbench.probes.features import all_features
    from accelbench.probes.work import load_feature_file, probe_record
    from accelbench.render.probe_table import feature_list_table

    for path in options.feature_files:
        load_feature_file(Path(path))
    if args.list:
        make_console().print(feature_list_table(all_features()))
        return 0
    if args.output:
        check_writable(args.output)
    features = chosen_features(list(options.feature_patterns) or None, options.skip_compile)
    devices = DeviceSet.current()
    chosen = devices.select(options.device)
    recorded = RecordedProbe(options.device, tuple(f.name for f in features),
                             options.skip_compile, options.isolation)

    def drive(on_case: Callable[[RunRecord], None]) -> RunRecord:
        return probe_record(devices, chosen, features, ["accelbench", *argv], recorded,
                            on_case=on_case, isolation=options.isolation,
                            timeout=options.case_timeout, feature_files=options.feature_files,
                            debug=options.debug, live=not args.quiet)

    return run_driven(drive, args.output, args.db, lambda record, saved: _show(
        record, saved, args.output, args.json), exit_code=lambda record: 0)


def _show(record: RunRecord, saved: Path, output: Path | None, as_json: bool) -> None:
    # With --json, stdout carries only the JSON; where it was saved goes to stderr.
    from accelbench.render.probe_table import probe_table

    show_record(record, saved, output, as_json, lambda shown: [probe_table(shown)])
