"""Run inside a pseudo-terminal by tests/test_fit_pty.py: ``python tests/fit_show.py DIR WIDTH...``
sets the terminal's width (TIOCSWINSZ on its own stdout, the pty) to each WIDTH in turn and prints
every renderer's typical output from the records in DIR, as the commands print them, then every
command's ``--help`` and the commands that read stored results (``accelbench.cli.main``, in this
one process: one interpreter start for every width), each after a "=== WIDTH NAME" line. rich and
argparse read the terminal's width: COLUMNS is unset."""

from __future__ import annotations

import contextlib
import fcntl
import json
import struct
import sys
import termios
from pathlib import Path

from rich.console import Console
from rich.text import Text

WIDTH = [0]


def _section(name: str) -> None:
    sys.stdout.write(f"=== {WIDTH[0]} {name}\n")
    sys.stdout.flush()


def set_width(columns: int) -> None:
    """The terminal is now ``columns`` wide, for everything that asks it from here on."""
    sys.stdout.flush()
    fcntl.ioctl(sys.stdout.fileno(), termios.TIOCSWINSZ, struct.pack("HHHH", 60, columns, 0, 0))
    WIDTH[0] = columns


def main(folder: Path) -> None:
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
    out = Console()
    _section("run")
    run_show(record("run.json"), saved, None, False, [])
    _section("run --wide")
    run_show(record("run.json"), saved, None, True, [])
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
    for argv in argvs:
        argv = [arg for arg in argv if arg]
        _section(" ".join(argv))
        with contextlib.suppress(SystemExit):  # --help
            main(argv)


if __name__ == "__main__":
    for width in sys.argv[2:]:
        set_width(int(width))
        main(Path(sys.argv[1]))
