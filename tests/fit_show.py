"""Run inside a pseudo-terminal by tests/cli/test_fit_pty.py, and into a pipe by
tests/test_piped_width.py: ``python tests/fit_show.py DIR WIDTH...`` sets the width to each WIDTH
in turn and prints every renderer's typical output from the records in DIR, as the commands print
them, then every command's ``--help`` and the commands that read stored results
(``accelbench.cli.main``, in this one process: one interpreter start for every width), each after
a "=== WIDTH NAME" line. On a terminal the width is the terminal's (TIOCSWINSZ on its own stdout;
COLUMNS is unset); into a pipe it is COLUMNS, as a user sets it for ``| less`` or a CI log."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import struct
import sys
import termios
from pathlib import Path

from rich.text import Text

WIDTH = [0]


def _section(name: str) -> None:
    sys.stdout.write(f"=== {WIDTH[0]} {name}\n")
    sys.stdout.flush()


def set_width(columns: int) -> None:
    """The terminal (or, into a pipe, COLUMNS) is now ``columns`` wide, for everything that asks
    it from here on."""
    sys.stdout.flush()
    if sys.stdout.isatty():
        fcntl.ioctl(sys.stdout.fileno(), termios.TIOCSWINSZ, struct.pack("HHHH", 60, columns, 0, 0))
    else:
        os.environ["COLUMNS"] = str(columns)
    WIDTH[0] = columns


def main(folder: Path) -> None:
    from accelbench.cli.console import make_console
    from accelbench.cli.probe import _show as probe_show
    from accelbench.cli.run import _show as run_show
    from accelbench.cli.sweep import _show as sweep_show
    from accelbench.measure.ceilings.roofline import Roofline
    from accelbench.render.check_table import check_table
    from accelbench.render.doctor import render_doctor
    from accelbench.render.fit import Prose
    from accelbench.render.list_table import facts_table, notes
    from accelbench.render.roofline_table import roofline_table
    from accelbench.render.scale_table import scale_table
    from accelbench.render.selftest_table import check_line, summary_line
    from accelbench.results import RunRecord
    from accelbench.workloads.facts_record import facts_from_dict

    def record(name: str) -> RunRecord:
        return RunRecord.from_dict(json.loads((folder / name).read_text()))

    saved = Path("results/20261126T013903Z-run-0123456789ab.json")  # as short as a real one
    out = make_console()
    _section("run")
    run_show(record("run.json"), saved, None, False, [])
    _section("run --wide")
    run_show(record("run.json"), saved, None, True, [])
    for name in sorted(folder.glob("protocol-*.json")):  # every --protocol, as run prints it
        _section(f"run --protocol {name.stem.removeprefix('protocol-')}")
        run_show(record(name.name), saved, None, False, [])
    _section("check")
    out.print(check_table(record("check.json")))
    _section("sweep")
    sweep_show(record("sweep.json"), saved, None)
    _section("probe")
    probe_show(record("probe.json"), saved, None, False)
    _section("scale")
    out.print(scale_table(record("scale.json")))
    _section("roofline")
    for data in json.loads((folder / "roofline.json").read_text()):
        out.print(roofline_table(Roofline.from_dict(data)))
    _section("selftest")
    summary = json.loads((folder / "selftest.json").read_text())
    for check in summary["checks"]:
        out.print(Prose(Text.from_markup(check_line(check))))
    out.print(Prose(Text.from_markup(summary_line(summary))))
    _section("doctor")
    out.print(render_doctor(json.loads((folder / "doctor.json").read_text())))
    _section("list")
    facts = [facts_from_dict(item) for item in json.loads((folder / "list.json").read_text())]
    out.print(facts_table(facts))
    for line in notes(facts):
        out.print(Prose(Text.from_markup(line)))
    commands(folder)


def commands(folder: Path) -> None:
    """Every --help, then the commands that read stored results, through the CLI's entry point."""
    from accelbench.cli import COMMANDS, main

    db = ["--db", str(folder / "history.sqlite")]
    runs = [str(folder / "earlier.json"), str(folder / "run.json")]
    argvs = [*([name, "--help"] for name in ("", *COMMANDS)), ["hub", "compact", "--help"],
             ["hub", "aggregate", "--help"],
             ["history", *db], ["history", "--workload", "mnist", "--mode", "train", *db],
             ["compare", *runs], ["compare", "--reference"],
             ["compare", runs[1], "--against", str(folder / "bundles")],
             ["share", runs[1], "--dry-run"]]
    protocols = sorted(str(path) for path in folder.glob("protocol-*.json"))
    if protocols:
        # plain-mlperf.json: mlperf-client's work without the protocol ("protocol none vs ...")
        argvs += [["compare", *protocols, str(folder / "plain-mlperf.json"), runs[1]],
                  ["compare", "--published", *protocols], ["share", *protocols, "--dry-run"]]
    for argv in argvs:
        argv = [arg for arg in argv if arg]
        _section(" ".join(argv))
        with contextlib.suppress(SystemExit):  # --help
            main(argv)


if __name__ == "__main__":
    for width in sys.argv[2:]:
        set_width(int(width))
        main(Path(sys.argv[1]))
