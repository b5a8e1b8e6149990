"""``gameday faults``: every fault kind gameday knows, as its declaration says."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._core.console import make_console
from chaos_ext._core.ledger import FAULT_KINDS, FaultKind
from chaos_ext._runner.execute import EXIT_HELD, EXIT_INVALID

HELP = """\
List every fault kind: the actions that inject it, its rollback activity and
undo, whether `gameday plan` can show it, what `gameday ledger --scan` looks
for when the ledger is lost, how it ends by itself (its deadline and
watchdog) and its docs page. Each kind is declared once, in
chaos_ext/<domain>/kinds.py (CONTRIBUTING.md: "Adding a fault kind").

Roles: fault (injected and undone), remedy (a change on purpose, not undone),
adoption (what `gameday rollback --orphans` records for an orphan it found),
internal (the runner's own entries).

examples:
  gameday faults
  gameday faults dns-rate-limit
  gameday faults --json
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "faults",
        help="list every fault kind: actions, undo, plan, scan, deadline",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("kind", nargs="?", metavar="KIND", help="show one kind in full")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=handle)


def _activities(kind: FaultKind) -> str:
    actions = ", ".join(sorted(kind.actions)) or "-"
    return f"{actions} -> {kind.rollback}" if kind.rollback else actions


def _plan(kind: FaultKind) -> str:
    if not kind.actions:
        return "-"
    return "yes" if all(p is not None for p in kind.actions.values()) else "no"


def _table(kinds: list[FaultKind]) -> Table:
    table = Table(title=f"fault kinds ({len(kinds)})")
    table.add_column("kind", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("actions -> rollback", overflow="fold")
    table.add_column("plan", no_wrap=True)
    table.add_column("scan finds", overflow="fold")
    table.add_column("ends by itself", overflow="fold")
    table.add_column("docs", no_wrap=True)
    for kind in kinds:
        table.add_row(
            kind.name,
            kind.role,
            _activities(kind),
            _plan(kind),
            _scan(kind),
            _ends(kind),
            kind.docs or "-",
        )
    return table


def _scan(kind: FaultKind) -> str:
    if kind.scan is not None:
        return f"{kind.scan.looks_for} ({kind.scan.place})"
    return f"(records the orphans the scan of {kind.adopts} finds)" if kind.adopts else "-"


def _ends(kind: FaultKind) -> str:
    if kind.role != "fault":
        return "-"
    return kind.ends_by_itself or "no: until undone (its rollback, or gameday rollback)"


def handle(args: argparse.Namespace, console: Console) -> int:
    kinds = FAULT_KINDS.load_all()
    if args.kind:
        chosen = [k for k in kinds if k.name == args.kind]
        if not chosen:
            names = ", ".join(k.name for k in kinds)
            console.print(
                f"[red]no fault kind {escape(repr(args.kind))}: the kinds are {escape(names)}[/]",
                highlight=False,
            )
            return EXIT_INVALID
        kinds = chosen
    if args.json:
        print(json.dumps([k.as_dict() for k in kinds], indent=2))  # noqa: T201 - the output
        return EXIT_HELD
    out = make_console(no_color=args.no_color)
    if args.kind:
        out.print_json(json.dumps(kinds[0].as_dict()))
        return EXIT_HELD
    out.print(_table(kinds))
    return EXIT_HELD
