"""The system side of ``gameday ledger`` and ``gameday rollback``: scan, show, undo orphans."""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext._core.ledger import Ledger
from chaos_ext._runner.orphans import Finding, ScanResult, scan, undo_orphans
from chaos_ext._runner.sweep import shielded
from chaos_ext._runner.verdict import EXIT_FAILED, EXIT_HELD
from chaos_ext.cli._options import add_kube_options
from chaos_ext.db.leftovers import DSN_VAR, scan_dsn

__all__ = [
    "add_target_options",
    "after_rollback",
    "orphan_lines",
    "remove_orphans",
    "scan_for",
    "show_scan",
]

REMEDY = "remove them with `gameday rollback --orphans`"
_MARK = {"orphan": "[red]orphan[/]", "owned": "[green]owned[/]", "unknown": "[yellow]unknown[/]"}


def add_target_options(parser: Any, *, kubernetes: bool = True) -> None:
    """``--db-dsn`` (and ``--kubeconfig``/``--context`` unless the command has its own)."""
    parser.add_argument(
        "--db-dsn",
        metavar="DSN",
        help="PostgreSQL server to scan for gameday's sessions (postgresql://user@host:port/db;"
        f" the password from PGPASSWORD or ${DSN_VAR} is better than in the DSN)",
    )
    if kubernetes:
        add_kube_options(
            parser, purpose="also scans it for cordoned nodes, load Jobs and sidecar backups"
        )


def scan_for(args: Namespace) -> ScanResult:
    """The cheap local scan, plus the cluster when ``--kubeconfig``/``--context`` name one,
    plus a PostgreSQL server when ``--db-dsn`` (or ``$GAMEDAY_SCAN_DSN``) names one."""
    # the kubeconfig and the DSN reach the scan and the orphan undo through the command's
    # Settings (cli.main installs them); the DSN is never recorded
    cluster = bool(getattr(args, "kubeconfig", None) or getattr(args, "context", None))
    return scan(kubernetes=cluster, context=getattr(args, "context", None), db_dsn=scan_dsn())


def _line(finding: Finding) -> str:
    lo = finding.leftover
    owner = "" if finding.orphan else f" — {escape(finding.owner_text())}"
    return f"  {_MARK[finding.status()]} {escape(lo.ref)}: {escape(lo.what)}{owner}"


def orphan_lines(console: Console, found: ScanResult) -> bool:
    """Name every orphan and unknown object and how to remove them; True if there is one."""
    bad = [f for f in found.findings if f.status() != "owned"]
    _problems(console, found)
    if not bad:
        return False
    console.print(
        f"[bold red]✗ {len(bad)} object(s) of gameday's on this machine that no open ledger"
        " entry refers to:[/]",
        highlight=False,
    )
    for finding in bad:
        console.print(_line(finding), highlight=False)
    console.print(REMEDY + " (`gameday ledger --scan` lists everything found)", highlight=False)
    return True


def _problems(console: Console, found: ScanResult) -> None:
    if found.out_of_reach:
        console.print(f"[yellow]⚠ {escape(found.out_of_reach)}[/]", highlight=False)
    for problem in found.problems:
        console.print(f"  [yellow]note: {escape(problem)}[/]", highlight=False)


def show_scan(console: Console, found: ScanResult) -> None:
    """Everything the scan found, owned or not, one line each."""
    console.print(f"scanned: {', '.join(found.parts) or 'nothing'}", highlight=False, markup=False)
    _problems(console, found)
    if not found.findings:
        console.print("[green]nothing of gameday's found in the system[/]")
        return
    for finding in found.findings:
        console.print(_line(finding), highlight=False)
    orphans = [f for f in found.findings if f.status() != "owned"]
    if orphans:
        console.print(f"[red]{len(orphans)} orphan(s)[/]: {REMEDY}", highlight=False)
    else:
        console.print("[green]every object found belongs to an open ledger entry[/]")


def remove_orphans(console: Console, book: Ledger, found: ScanResult, only: list[str]) -> bool:
    """Undo the orphans (``only`` those refs, if given); True if every one is gone."""
    unknown = [f for f in found.findings if f.unknown and (not only or f.leftover.ref in only)]
    for finding in unknown:
        console.print(f"  [yellow]·[/] left alone {_line(finding).strip()}", highlight=False)
    done = undo_orphans(found, book, only=only)
    if not done:
        console.print("no orphan to remove")
    ok = not unknown
    for finding, outcome, note in done:
        good = outcome.ok if outcome is not None else not finding.orphan  # owned meanwhile
        ok = ok and good
        mark = ("[green]✓[/]" if outcome else "[dim]·[/]") if good else "[red]✗[/]"
        console.print(
            f"  {mark} orphan {escape(finding.leftover.ref)}: {escape(note)}", highlight=False
        )
    return ok


def after_rollback(
    book: Ledger, args: Namespace, console: Console, code: int, *, had_entries: bool
) -> int:
    """The system after the ledger's own undo: name the orphans, or undo them (--orphans)."""
    found = scan_for(args)
    if args.orphans:
        with shielded(console):
            removed = remove_orphans(console, book, found, args.only)
        if not removed:
            console.print("[red]some orphans are still there[/]")
            return EXIT_FAILED
        if not args.only and orphan_lines(console, scan_for(args)):
            return EXIT_FAILED  # a new one, or one an undo did not really remove
    elif orphan_lines(console, found):
        return EXIT_FAILED
    clean = not found.out_of_reach and (not found.findings or all(f.owners for f in found.findings))
    if code == EXIT_HELD and not had_entries and not args.orphans and clean:
        what = "no open faults" if not args.run else f"no open faults of run {args.run}"
        console.print(
            f"nothing to roll back: {escape(what)} in {escape(str(book.path))} (ledger verified;"
            " no orphan on this machine)"
        )
    return code
