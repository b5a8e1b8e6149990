"""Ledger sweeps: undo open entries, newest first, and say what happened.

Also the ledger's full check as the CLI shows it: :func:`checked` prints what
is wrong and what may still be injected, so that no command says "nothing
open" about a ledger it cannot trust.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext._core import stop as _stop
from chaos_ext._core.ledger import Entry, Ledger, UndoOutcome, recorded_here, undo
from chaos_ext._runner.signals import handled
from chaos_ext.errors import LedgerError, LedgerInconsistent

__all__ = [
    "checked",
    "dead_entries",
    "print_suspects",
    "run_history",
    "shielded",
    "sweep",
    "sweep_run",
]


def dead_entries(ledger: Ledger) -> list[Entry]:
    """Open entries whose owner process is gone (a crashed or killed run)."""
    return [entry for entry in ledger.open_entries() if not entry.owner_alive()]


def print_suspects(console: Console, suspects: Sequence[dict[str, Any]]) -> None:
    """List entries that may still be injected, one line each."""
    if not suspects:
        console.print("  no entry is shown open by either copy")
        return
    console.print(f"[bold]{len(suspects)} fault(s) may still be injected:[/]")
    for s in suspects:
        console.print(
            f"  • {escape(str(s.get('id')))} {escape(str(s.get('kind')))} on"
            f" {escape(str(s.get('target')))} (run {escape(str(s.get('run_id')))},"
            f" owner pid {s.get('owner_pid')})",
            highlight=False,
        )


def checked(ledger_or_error: Ledger | LedgerError, console: Console) -> Ledger | None:
    """The ledger if its full check passes; else print why and what may be open, None."""
    if isinstance(ledger_or_error, LedgerError):
        _explain(console, ledger_or_error)
        return None
    verdict = ledger_or_error.verify()
    if verdict.ok:
        return ledger_or_error
    console.print(
        f"[bold red]✗ the fault ledger at {escape(str(verdict.path))} cannot be trusted:[/]",
        highlight=False,
    )
    for problem in verdict.problems[:20]:
        console.print(f"  - {escape(problem)}", highlight=False)
    print_suspects(console, [e.as_dict() for e in verdict.suspects])
    console.print("run `gameday ledger --repair`, then `gameday rollback`")
    return None


def _explain(console: Console, error: LedgerError) -> None:
    console.print(f"[bold red]✗ {escape(str(error))}[/]", highlight=False)
    if isinstance(error, LedgerInconsistent):
        print_suspects(console, error.suspects)


def sweep(entries: Sequence[Entry], ledger: Ledger, console: Console) -> list[UndoOutcome]:
    """Undo ``entries`` newest first; never stops on a failing undo."""
    outcomes = []
    for entry in sorted(entries, key=lambda e: e.created_at, reverse=True):
        outcome = undo(entry, ledger)
        mark = "[green]✓[/]" if outcome.ok else "[red]✗[/]"
        mark = mark if outcome.undone_here else "[dim]·[/]"  # another rollback did it
        console.print(
            f"  {mark} undo {entry.kind} on {escape(entry.target)}: {escape(outcome.note)}",
            highlight=False,
        )
        outcomes.append(outcome)
    return outcomes


def sweep_run(
    ledger: Ledger,
    run_id: str,
    console: Console,
    *,
    skip: Sequence[str] = (),
    only: Sequence[str] = (),
) -> list[UndoOutcome]:
    """Undo what ``run_id`` left open (kinds in ``only`` if given, none in ``skip``).

    If the ledger cannot be read, the entries this process recorded are undone
    from memory, so a ledger damaged during the run does not keep its faults in
    place; the outcome then fails (the ledger must be repaired to show them
    closed).
    """

    def wanted(entry: Entry) -> bool:
        return entry.kind not in skip and (not only or entry.kind in only)

    try:
        left = [e for e in ledger.open_entries(run_id=run_id) if wanted(e)]
    except LedgerError as exc:
        _explain(console, exc)
        left = [e for e in recorded_here(run_id) if wanted(e)]
        console.print(f"[bold cyan]▶ ledger sweep from memory[/]: {len(left)} fault(s) recorded")
        outcomes = sweep(left, ledger, console)
        broken = Entry(
            id="-",
            kind="ledger",
            target=str(ledger.path),
            module=__name__,
            recipe={},
            run_id=run_id,
            owner_pid=0,
            owner_start=None,
            created_at=0.0,
        )
        return [*outcomes, UndoOutcome(broken, False, f"the ledger cannot be trusted: {exc}")]
    if not left:
        return []
    what = "fault(s)" if not only else "entries"
    console.print(f"[bold cyan]▶ ledger sweep[/]: {len(left)} {what} still open")
    return sweep(left, ledger, console)


def run_history(ledger: Ledger, run_id: str) -> list[dict[str, Any]]:
    """The run's entries for its journal; from memory (marked so) if the ledger is unreadable."""
    try:
        return [entry.as_dict() for entry in ledger.history(run_id=run_id)]
    except LedgerError as exc:
        return [
            {**entry.as_dict(), "state": "unknown", "note": f"ledger unreadable: {exc}"}
            for entry in recorded_here(run_id)
        ]


@contextmanager
def shielded(console: Console) -> Iterator[None]:
    """Keep SIGINT/SIGTERM from cutting a rollback short: they are written down and stop
    the run (no recovery wait, no next experiment, exit 2), but the undo completes."""

    def note(signum: int, frame: FrameType | None) -> None:
        cause = signal.Signals(signum).name
        first = _stop.request_stop(cause, end_processes=False)
        effect = "stopped the run: the rollback finishes first, no recovery wait"
        _stop.note(cause, effect if first else "noted: the run was already stopping")
        console.print(f"[yellow]{cause} received: finishing the rollback first[/]")

    with handled(note):
        yield
