"""``accelbench list``: the registered workloads with their model facts (parameters, FLOPs, sizes).

Named ``list_`` (as ``import_``) because a submodule called ``list`` would become the attribute
``accelbench.cli.list`` and shadow the builtin inside the package's own ``__init__``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from accelbench.cli.common import add_json_argument, add_quiet_argument
from accelbench.cli.console import make_console


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("list", help="show the workloads, their sizes and FLOPs")
    parser.add_argument("patterns", nargs="*", metavar="PATTERN",
                        help="workload names or wildcards like 'resnet*' (default: all)")
    add_json_argument(parser, "print the facts as JSON (the values the table shows, unrounded)")
    add_quiet_argument(parser, "the table only: no notes under it")
    parser.set_defaults(execute=execute)


def _builtin_names(patterns: list[str]) -> list[str] | None:
    """The built-in workloads the patterns name (torch-free), or None when one names a model
    (``timm:...``) or anything else only the catalogue resolves."""
    from accelbench.workloads.registry import builtin_names, is_model_name, match

    if any(is_model_name(p) for p in patterns):
        return None
    names = match(patterns, models=lambda _: []) if patterns else builtin_names()
    return names if set(names) <= set(builtin_names()) else None


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from rich.text import Text

    from accelbench.render.fit import Prose
    from accelbench.render.list_table import facts_table, notes
    from accelbench.workloads import facts_cache

    names = _builtin_names(args.patterns)
    facts = facts_cache.load(names) if names is not None else None
    if facts is None:
        from accelbench.workloads import match_workloads, workload_names
        from accelbench.workloads.facts import model_facts  # torch: counts the FLOPs

        names = names or (match_workloads(args.patterns) if args.patterns else workload_names())
        facts = [model_facts(name) for name in names]
        if _builtin_names(args.patterns) is not None:
            facts_cache.store(facts)
    if args.json:
        print(json.dumps([item.to_dict() for item in facts], indent=1))
    else:
        console = make_console()
        console.print(facts_table(facts))
        for line in [] if args.quiet else notes(facts):
            console.print(Prose(Text.from_markup(line)))
    return 0
