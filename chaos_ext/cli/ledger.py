"""``gameday ledger`` and ``gameday rollback``: see, check, repair and undo recorded faults."""

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

from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core.console import make_console
from chaos_ext._core.ledger import Entry, Ledger, default_ledger
from chaos_ext._runner.retry import retry_rollbacks
from chaos_ext._runner.sweep import checked, print_suspects, shielded, sweep
from chaos_ext._runner.verdict import EXIT_DEVIATED, EXIT_FAILED, EXIT_HELD, EXIT_INVALID
from chaos_ext.cli._options import add_kube_options, add_var_options
from chaos_ext.cli._orphans import (
    add_target_options,
    after_rollback,
    orphan_lines,
    scan_for,
    show_scan,
)
from chaos_ext.errors import LedgerError, LedgerInconsistent

LEDGER_HELP = """\
List the faults recorded in the fault ledger that are still open (injected and
not yet undone), with their kind, target, run, owner process, the system
they live in and their watchdog (its pid, when it ends a timed fault, its
grace after the run died). --all shows the history too; --json prints machine-readable
entries.

The ledger is checked before it is listed (SQLite's own check, its event log
and its marker, reconciled): if it cannot be trusted, what may still be
injected is listed instead and the exit code is 2; it never says "no open
faults" about a ledger it cannot prove.

  --verify   the full check (SQLite integrity_check), reported in detail
  --repair   rebuild the damaged part from the intact one (the damaged files
             are kept aside as *.damaged-<time>); --accept-loss when neither
             part is intact keeps every entry still readable (open ones stay open)

The system is checked too, not only the ledger: every listing first looks,
cheaply, for what gameday leaves on this machine (what each fault kind's scan
looks for: helper processes by their GAMEDAY_HELPER_TOKEN, our nft tables and
latency qdiscs in every network namespace, named or not; `gameday faults`
lists them), and checks each object against
every ledger of the machine. An object no open entry refers to is an orphan
(its ledger was lost, or repaired with --accept-loss): the listing names it
and never says "no open faults" while one exists.

  --scan     list everything found in the system, owned or orphan, with its
             owner entry (ledger, entry id, run, whether the runner lives);
             with --kubeconfig/--context also the cluster's nodes cordoned by
             a drain (annotation chaos-ext.gameday/cordoned-by), load Jobs
             and Secrets (labels app.kubernetes.io/managed-by=gameday,
             gameday.io/load) and sidecar template changes (their backup
             ConfigMaps, label chaos-ext.gameday/backup); with --db-dsn (or $GAMEDAY_SCAN_DSN) a
             PostgreSQL server's sessions named gameday-exhaust-<ledger id>;
             works with or without a ledger file
  --no-scan  the ledger only (the exit code then says nothing of the system)

Looking into other network namespaces needs root (CAP_SYS_ADMIN): without it
only this process's own namespace is scanned, one line says what was not
looked at, and the exit code is 1 (it cannot say "no orphan").

exit code: 0 the ledger is sound and no orphan was found; 1 the ledger is
sound but the system holds orphans (or objects whose owner cannot be told:
a ledger that cannot be read), or part of it could not be looked at (not
root); 2 the ledger is not sound (or the repair could not be done).

example: a holder whose ledger was deleted, beside a live run's table
  $ gameday ledger --scan
  scanned: helpers, nft tables, qdiscs
    orphan helper:5b61dc5b66dc4da7: helper chaos_ext.dns._tcp_holder pid 4242
      (GAMEDAY_HELPER_TOKEN=5b61dc5b66dc4da7)
    owned nft:4026532211:gameday_dnsrate_0c1d2e3f4a5b: nft table inet
      gameday_dnsrate_0c1d2e3f4a5b in netns:app (netns inode 4026532211) — entry
      9a8b0c1d2e3f4a5b in /var/lib/gameday/ledger.sqlite3 (run 20261201T101500-1a2b3c4d,
      owner pid 4100 alive)
  1 orphan(s): remove them with `gameday rollback --orphans`
  $ gameday rollback --orphans
    ✓ orphan helper:5b61dc5b66dc4da7: stopped 1 helper process(es) with token 5b61dc5b66dc4da7
"""

ROLLBACK_HELP = """\
Undo every open fault in the ledger, newest first (or only one run's with
--run). Use it after a runner was killed (kill -9, lost node). Undo is
idempotent: a fault that is already gone is simply closed.

Each fault also has a watchdog (docs/ledger.md, "The dead-man switch") that
undoes it once its run is dead: at its deadline if it has a duration, else
after the grace period (`gameday run --watchdog-grace`, default 60 s). This
command and a watchdog never both undo one fault: whoever comes second finds
it closed and says so (`·`, "already undone meanwhile ... (watchdog pid N: ...)").

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

Afterwards the machine is scanned cheaply for orphans, objects of gameday's
that no open entry of any ledger refers to (see `gameday ledger --help`);
they are named, with the command that removes them:

--orphans also undoes them, each with its kind's own undo code, recorded in
the ledger first (an entry that is closed at once, with what was done). An
object that any open entry of any ledger refers to, a live run's or a dead
one's, is never touched; neither is one whose owner cannot be told (a ledger
that cannot be read). --only REF narrows it to the objects named (the refs
`gameday ledger --scan` prints). With --kubeconfig/--context the cluster is
scanned too (cordoned nodes, load Jobs, sidecar template backups).

exit code: 0 when the ledger is clean afterwards and no orphan is left on the
machine; 2 if an undo failed or was refused (the entry stays open with its
error; fix the cause and run it again), the ledger cannot be trusted (see
`gameday ledger --verify`), or an orphan is left (without --orphans: any).

examples:
  gameday rollback                              after a kill -9: undo every open fault
  gameday rollback --run 20261201T101500-1a2b3c4d
  gameday rollback --kubeconfig ~/.kube/prod-eu --context prod-eu-admin
  gameday rollback --journal out/journal-db-latency.json --var-file prod.yaml
  gameday rollback --orphans                    undo what no ledger entry refers to any more
  gameday rollback --orphans --only helper:5b61dc5b66dc4da7 --kubeconfig ~/.kube/prod-eu
"""


def register(sub: Any) -> None:
    ledger = sub.add_parser(
        "ledger",
        help="list open faults; check or repair the ledger",
        description=LEDGER_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ledger.add_argument("--all", action="store_true", help="include undone entries (history)")
    ledger.add_argument("--json", action="store_true", help="print JSON instead of a table")
    scanning = ledger.add_mutually_exclusive_group()
    scanning.add_argument(
        "--scan", action="store_true", help="list what gameday left in the system, and whose"
    )
    scanning.add_argument(
        "--no-scan", action="store_true", help="the ledger only: do not look at the system"
    )
    add_target_options(ledger)
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
    add_kube_options(
        rollback,
        purpose="credentials for the recorded cluster (also scanned for orphans)",
        context_default="the one recorded with the fault if the kubeconfig has it, else "
        "the current one",
    )
    rollback.add_argument(
        "--orphans",
        action="store_true",
        help="also undo what gameday left that no open ledger entry refers to",
    )
    add_target_options(rollback, kubernetes=False)
    rollback.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="REF",
        help="with --orphans: only the orphan with this ref (repeatable)",
    )
    rollback.add_argument(
        "--journal",
        metavar="JOURNAL",
        help="retry the rollback activities that did not succeed in this run's journal",
    )
    add_var_options(rollback, purpose="for the rollbacks of --journal, as for `gameday run`")
    rollback.set_defaults(handler=handle_rollback)


def _open(console: Console) -> Ledger | None:
    try:
        return checked(default_ledger(), console)
    except LedgerError as exc:
        return checked(exc, console)


def _owner(e: Entry) -> str:
    return f"{e.owner_pid} ({'alive' if e.owner_alive() else 'dead'})"


def _watchdog_of(e: Entry, now: float) -> str:
    info = e.watchdog or {}
    if not info.get("pid"):
        return "none"
    pid, start = int(info["pid"]), info.get("start")
    alive = start is not None and fault_ledger.process_start_time(pid) == start
    deadline = info.get("deadline")
    grace = float(info.get("grace_seconds") or 0)
    when = f"ends in {max(0.0, deadline - now):.0f} s" if deadline else "untimed"
    after = f"grace {grace:g} s" if grace else "grace off"
    return f"{pid} ({'alive' if alive else 'gone'}; {when}, {after})"


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
    if args.scan:
        return _scan(args, console)
    return _list(args, console)


def _list(args: argparse.Namespace, console: Console) -> int:
    """The open entries (``--all``: every one), then the cheap scan's orphans."""
    book = _open(console)
    if book is None:
        return _untrusted(args, console)
    entries = book.history(limit=1000) if args.all else book.open_entries()
    found = None if args.no_scan else scan_for(args)
    if args.json:
        print(json.dumps([e.as_dict() for e in entries], indent=2))  # noqa: T201 - stdout is the output
    elif entries:
        _table(book, entries, no_color=args.no_color)
    if found is not None and orphan_lines(console, found):
        return EXIT_DEVIATED
    partial = found is not None and found.out_of_reach is not None
    if not entries and not args.json:
        checked_too = (
            ""
            if args.no_scan
            else "; this machine only partly scanned, see above"
            if partial
            else "; no orphan on this machine"
        )
        console.print(f"no open faults in {book.path} (ledger verified{checked_too})", markup=False)
    return EXIT_DEVIATED if partial else EXIT_HELD


def _untrusted(args: argparse.Namespace, console: Console) -> int:
    """The ledger cannot be trusted: its suspects (printed already), and the system's orphans."""
    if args.json:
        print(json.dumps({"ok": False, "suspects": _suspects()}, indent=2))  # noqa: T201
    if not args.no_scan:
        orphan_lines(console, scan_for(args))
    return EXIT_FAILED


def _scan(args: argparse.Namespace, console: Console) -> int:
    """``gameday ledger --scan``: the system first, then the ledger's own check."""
    found = scan_for(args)
    try:
        sound = default_ledger().verify().ok
    except LedgerError:
        sound = False
    if args.json:
        print(json.dumps({"ledger_sound": sound, **found.as_dict()}, indent=2))  # noqa: T201
    else:
        show_scan(console, found)
        if not sound:
            console.print("[red]the ledger itself cannot be trusted: see `gameday ledger`[/]")
    if not sound:
        return EXIT_FAILED
    unsure = found.out_of_reach is not None or any(not f.owners for f in found.findings)
    return EXIT_DEVIATED if unsure else EXIT_HELD


def _table(book: Ledger, entries: list[Entry], *, no_color: bool) -> None:
    table = Table(title=f"fault ledger {book.path}")
    for column in ("id", "state", "kind", "target", "system", "run", "owner", "watchdog", "age"):
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
            _watchdog_of(e, now),
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
    if args.only and not args.orphans:
        console.print("[red]--only goes with --orphans[/]")
        return EXIT_INVALID
    book = _open(console)
    if book is None:
        if not args.orphans:
            orphan_lines(console, scan_for(args))
        return EXIT_FAILED  # orphans are not removed beside a ledger that cannot be trusted
    had_entries = bool(book.open_entries(run_id=args.run))
    code = _roll_back_entries(book, args, console)
    return after_rollback(book, args, console, code, had_entries=had_entries)


def _roll_back_entries(book: Ledger, args: argparse.Namespace, console: Console) -> int:
    entries = book.open_entries(run_id=args.run)
    if not entries:
        return EXIT_HELD  # said after the scan: "nothing to roll back" only if nothing is there
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
