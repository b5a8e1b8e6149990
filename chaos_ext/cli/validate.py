"""``gameday validate``: check experiments without touching anything."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from chaos_ext.cli._common import load_valid_experiments
from chaos_ext.runner.execute import EXIT_HELD, EXIT_INVALID

HELP = """\
Validate experiments: the Chaos Toolkit schema, that every Python activity
exists, and our activities' arguments (types and values such as CIDRs,
interface names, ranges). Nothing is injected and no target is contacted.
Exits 0 when every file is valid, 3 otherwise, with one line per problem:

  experiments/db-latency.json: method[0].provider.arguments: delay_ms: expected int, got 'abc'
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "validate", help="validate experiments, touch nothing", description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("experiments", nargs="+", metavar="EXPERIMENT", help="JSON/YAML files")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace, console: Console) -> int:
    loaded = load_valid_experiments(args.experiments, console)
    if loaded is None:
        return EXIT_INVALID
    for path, experiment in loaded:
        console.print(f"[green]valid:[/] {path} — {experiment['title']}", highlight=False)
    return EXIT_HELD
