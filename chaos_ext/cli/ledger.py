"""``gameday ledger`` and ``gameday rollback``: see, check, repair and undo recorded faults."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from chaoslib import convert_vars, merge_vars
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core.console import make_console
from chaos_ext._core.ledger import Entry, Ledger, default_ledger
from chaos_ext._runner.retry import retry_rollbacks
from chaos_ext._runner.sweep import checked, print_suspects, shielded, sweep
from chaos_ext._runner.verdict import EXIT_FAILED, EXIT_HELD, EXIT_INVALID
from chaos_ext.errors import LedgerError, LedgerInconsistent

LEDGER_HELP = """\
List the faults recorded in the fault ledger that are still open (injected and
not yet undone), with their kind, target, run, owner process and the system
they live in. --all shows the history too; --json prints machine-readable
entries.

The ledger is checked before it is listed (SQLite's own check, its event log
and its marker, reconciled): if it cannot be trusted, what may still be
injected is listed instead and the exit code is 2; it never says "no open
faults" about a ledger it cannot prove.

  --verify   the full check (SQLite integrity_check), reported in detail
  --repair   rebuild the damaged part from the intact one (the damaged files
             are kept aside as *.damaged-<time>); --accept-loss when neither
             part is intact keeps every entry still readable (open ones stay open)

exit code: 0 the ledger is sound, 2 it is not (or the repair could not be done).
"""

ROLLBACK_HELP = """\
Undo every open fault in the ledger, newest first (or only one run's with
--run). Use it after a runner was killed (kill -9, lost node). Undo is
idempotent: a fault that is already gone is simply closed.

Each fault is undone in the system it was injected into, or not at all: a
Kubernetes fault in the cluster whose identity was recorded (API server and
the kube-system namespace's uid), an SSH one on the host whose key was
recorded, a helper process on the machine that started it. If the current
configuration reaches another system, the undo is refused and says which;
give credentials for the recorded cluster with --kubeconfig/--context.

--journal JOURNAL retries, through Chaos Toolkit, the experiment's own rollback
activities that did not succeed in that run (a run whose outcome is
rollback-failed names this command). Configuration and secrets come from
--var/--var-file as for `gameday run`. Each attempt is recorded in the journal,
so a report made afterwards no longer lists a rollback that has now succeeded.

exit code: 0 when the ledger is clean afterwards; 2 if an undo failed or was
refused (the entry stays open with its error; fix the cause and run it again)
or the ledger cannot be trusted (see `gameday ledger --verify`).

examples:
  gameday rollback                              after a kill -9: undo every open fault
  gameday rollback --run 20261201T101500-1a2b3c4d
  gameday rollback --kubeconfig ~/.kube/prod-eu --context prod-eu-admin
  gameday rollback --journal out/journal-db-latency.json --var-file prod.yaml
"""

ROLLBACK_CONTEXT = "GAMEDAY_ROLLBACK_CONTEXT"


def register(sub: Any) -> None:
    ledger = sub.add_parser(
        "ledger",
        help="list open faults; check or repair the ledger",
        description=LEDGER_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ledger.add_argument("--all", action="store_true", help="include undone entries (history)")
    ledger.add_argument("--json", action="store_true", help="print JSON instead of a table")
    action = ledger.add_mutually_exclusive_group()
    action.add_argument("--verify", action="store_true", help="full check, reported in detail")
    action.add_argument("--repair", action="store_true", help="rebuild a damaged ledger")
    ledger.add_argument(
        "--accept-loss",
        action="store_true",
        help="with --repair: when no part is intact, keep what is still readable",
    )
    ledger.set_defaults(handler=handle_ledger)
    rollback = sub.add_parser(
        "rollback",
        help="undo every open fault",
        description=ROLLBACK_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rollback.add_argument("--run", metavar="RUN_ID", help="only this run's faults")
    rollback.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig with credentials for the recorded cluster"
    )
    rollback.add_argument(
        "--context", metavar="NAME", help="kubeconfig context of the recorded cluster"
    )
    rollback.add_argument(
        "--journal",
        metavar="JOURNAL",
        help="retry the rollback activities that did not succeed in this run's journal",
    )
    rollback.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="KEY[:TYPE]=VALUE",
        help="configuration value for --journal (repeatable)",
    )
    rollback.add_argument(
        "--var-file",
        action="append",
        default=[],
        metavar="FILE",
        help="configuration and secrets for --journal, as for `gameday run`",
    )
    rollback.set_defaults(handler=handle_rollback)


def _open(console: Console) -> Ledger | None:
    try:
        return checked(default_ledger(), console)
    except LedgerError as exc:
        return checked(exc, console)


def _owner(e: Entry) -> str:
    return f"{e.owner_pid} ({'alive' if e.owner_alive() else 'dead'})"


def _system(e: Entry) -> str:
    identity = e.identity or {}
    scope = identity.get("scope", "?")
    if scope == "kubernetes":
        cluster = identity.get("cluster") or {}
        return f"cluster {cluster.get('server')} (uid {str(cluster.get('uid'))[:8]})"
    if scope == "ssh":
        ssh = identity.get("ssh") or {}
        return f"ssh {ssh.get('host')}:{ssh.get('port')} ({ssh.get('host_key', '?')[:24]})"
    machine = identity.get("machine") or {}
    return f"host {machine.get('hostname', '?')}"


def handle_ledger(args: argparse.Namespace, console: Console) -> int:
    if args.accept_loss and not args.repair:
        console.print("[red]--accept-loss goes with --repair[/]")
        return EXIT_INVALID
    if args.verify:
        return _verify(console)
    if args.repair:
        return _repair(console, accept_loss=args.accept_loss)
    book = _open(console)
    if book is None:
        if args.json:
            print(json.dumps({"ok": False, "suspects": _suspects()}, indent=2))  # noqa: T201
        return EXIT_FAILED
    entries = book.history(limit=1000) if args.all else book.open_entries()
    if args.json:
        print(json.dumps([e.as_dict() for e in entries], indent=2))  # noqa: T201 - stdout is the output
    elif not entries:
        console.print(f"no open faults in {book.path} (ledger verified)")
    else:
        _table(book, entries, no_color=args.no_color)
    return EXIT_HELD


def _table(book: Ledger, entries: list[Entry], *, no_color: bool) -> None:
    table = Table(title=f"fault ledger {book.path}")
    for column in ("id", "state", "kind", "target", "system", "run", "owner", "age"):
        table.add_column(column)
    now = time.time()
    for e in entries:
        table.add_row(
            e.id,
            e.state,
            e.kind,
            e.target,
            _system(e),
            e.run_id,
            _owner(e),
            f"{now - e.created_at:.0f} s",
        )
    make_console(no_color=no_color).print(table)


def _suspects() -> list[dict[str, Any]]:
    return [e.as_dict() for e in fault_ledger.verify().suspects]


def _verify(console: Console) -> int:
    verdict = fault_ledger.verify(full=True)
    for note in verdict.notes:
        console.print(f"  note: {escape(note)}", highlight=False)
    if verdict.ok:
        entries = verdict.db_entries or {}
        open_count = sum(1 for e in entries.values() if e.state == "open")
        console.print(
            f"[green]✓ the fault ledger at {escape(str(verdict.path))} is consistent:[/]"
            f" {len(entries)} entries, {open_count} open, {verdict.log_seq} events;"
            " database, event log and marker agree",
            highlight=False,
        )
        return EXIT_HELD
    console.print(f"[bold red]✗ the fault ledger at {escape(str(verdict.path))} is not sound:[/]")
    for problem in verdict.problems:
        console.print(f"  - {escape(problem)}", highlight=False)
    print_suspects(console, [e.as_dict() for e in verdict.suspects])
    console.print("run `gameday ledger --repair`, then `gameday rollback`")
    return EXIT_FAILED


def _repair(console: Console, *, accept_loss: bool) -> int:
    try:
        done = fault_ledger.repair(accept_loss=accept_loss)
    except LedgerInconsistent as exc:
        console.print(f"[bold red]✗ {escape(str(exc))}[/]", highlight=False)
        for problem in exc.problems:
            console.print(f"  - {escape(problem)}", highlight=False)
        print_suspects(console, exc.suspects)
        return EXIT_FAILED
    for line in done:
        console.print(f"  {escape(line)}", highlight=False)
    return _verify(console)


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
        console.print(
            f"{mark} rollback {escape(str(attempt['name']))} {attempt['status']}{escape(error)}",
            highlight=False,
        )
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
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = os.path.expanduser(args.kubeconfig)
    if args.context:
        os.environ[ROLLBACK_CONTEXT] = args.context
    book = _open(console)
    if book is None:
        return EXIT_FAILED
    entries = book.open_entries(run_id=args.run)
    if not entries:
        console.print(f"nothing to roll back: no open faults in {book.path} (ledger verified)")
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
