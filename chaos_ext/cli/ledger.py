"""``gameday ledger`` and ``gameday rollback``: see and undo recorded faults."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from chaoslib import convert_vars, merge_vars
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._console import make_console
from chaos_ext.ledger import default_ledger
from chaos_ext.runner.retry import retry_rollbacks
from chaos_ext.runner.sweep import shielded, sweep
from chaos_ext.runner.verdict import EXIT_FAILED, EXIT_HELD, EXIT_INVALID

LEDGER_HELP = """\
List the faults recorded in the fault ledger that are still open (injected and
not yet undone), with their kind, target, run and owner process. --all shows
the history too; --json prints machine-readable entries.
"""

ROLLBACK_HELP = """\
Undo every open fault in the ledger, newest first (or only one run's with
--run). Use it after a runner was killed (kill -9, lost node). Undo is
idempotent: a fault that is already gone is simply closed. Exits 0 when the
ledger is empty afterwards, 2 if an undo failed (the entry stays open with its
error; fix the cause and run it again).

--journal JOURNAL retries, through Chaos Toolkit, the experiment's own rollback
activities that did not succeed in that run (a run whose outcome is
rollback-failed names this command). Configuration and secrets come from
--var/--var-file as for `gameday run`. Each attempt is recorded in the journal,
so a report made afterwards no longer lists a rollback that has now succeeded.

examples:
  gameday rollback                              after a kill -9: undo every open fault
  gameday rollback --run 20261201T101500-1a2b3c4d
  gameday rollback --journal out/journal-db-latency.json --var-file prod.yaml
"""


def register(sub: Any) -> None:
    ledger = sub.add_parser(
        "ledger", help="list open faults", description=LEDGER_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    ledger.add_argument("--all", action="store_true", help="include undone entries (history)")
    ledger.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ledger.set_defaults(handler=handle_ledger)
    rollback = sub.add_parser(
        "rollback", help="undo every open fault", description=ROLLBACK_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    rollback.add_argument("--run", metavar="RUN_ID", help="only this run's faults")
    rollback.add_argument(
        "--journal", metavar="JOURNAL",
        help="retry the rollback activities that did not succeed in this run's journal",
    )  # fmt: skip
    rollback.add_argument(
        "--var", action="append", default=[], metavar="KEY[:TYPE]=VALUE",
        help="configuration value for --journal (repeatable)",
    )  # fmt: skip
    rollback.add_argument(
        "--var-file", action="append", default=[], metavar="FILE",
        help="configuration and secrets for --journal, as for `gameday run`",
    )  # fmt: skip
    rollback.set_defaults(handler=handle_rollback)


def handle_ledger(args: argparse.Namespace, console: Console) -> int:
    book = default_ledger()
    entries = book.history(limit=1000) if args.all else book.open_entries()
    if args.json:
        print(json.dumps([e.as_dict() for e in entries], indent=2))  # noqa: T201 - stdout is the output
        return EXIT_HELD
    if not entries:
        console.print(f"no open faults in {book.path}")
        return EXIT_HELD
    table = Table(title=f"fault ledger {book.path}")
    for column in ("id", "state", "kind", "target", "run", "owner", "age"):
        table.add_column(column)
    now = time.time()
    for e in entries:
        owner = f"{e.owner_pid} ({'alive' if e.owner_alive() else 'dead'})"
        table.add_row(
            e.id, e.state, e.kind, e.target, e.run_id, owner, f"{now - e.created_at:.0f} s"
        )
    make_console(no_color=args.no_color).print(table)
    return EXIT_HELD


def _retry_journal(args: argparse.Namespace, console: Console) -> int:
    try:
        config_vars, secret_vars = merge_vars(convert_vars(args.var), args.var_file)
        attempts = retry_rollbacks(Path(args.journal), config_vars, secret_vars)
    except (OSError, ValueError) as exc:
        console.print(f"[red]--journal {escape(args.journal)}: {escape(str(exc))}[/]")
        return EXIT_INVALID
    if not attempts:
        console.print(f"no rollback left to retry in {escape(args.journal)}")
        return EXIT_HELD
    for attempt in attempts:
        ok = attempt["status"] == "succeeded"
        mark = "[green]✓[/]" if ok else "[red]✗[/]"
        error = f": {attempt['error']}" if attempt.get("error") else ""
        console.print(f"{mark} rollback {escape(str(attempt['name']))} {attempt['status']}"
                      f"{escape(error)}", highlight=False)  # fmt: skip
    failed = [a for a in attempts if a["status"] != "succeeded"]
    if failed:
        console.print(f"[red]{len(failed)} rollback(s) still failing; fix the cause and retry[/]")
        return EXIT_FAILED
    return EXIT_HELD


def handle_rollback(args: argparse.Namespace, console: Console) -> int:
    if args.journal:
        code = _retry_journal(args, console)
        if args.run is None:
            return code
    book = default_ledger()
    entries = book.open_entries(run_id=args.run)
    if not entries:
        console.print(f"nothing to roll back: no open faults in {book.path}")
        return EXIT_HELD
    live = [e for e in entries if e.owner_alive()]
    if live:
        console.print(
            f"[yellow]note: {len(live)} fault(s) belong to a runner that is still alive; "
            "undoing them anyway[/]"
        )
    console.print(f"rolling back {len(entries)} open fault(s)")
    with shielded(console):
        outcomes = sweep(entries, book, console)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        console.print(f"[red]{len(failed)} undo(s) failed; the entries stay open[/]")
        return EXIT_FAILED
    console.print("[green]ledger is clean[/]")
    return EXIT_HELD
