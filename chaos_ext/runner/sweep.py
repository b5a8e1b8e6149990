"""Ledger sweeps: undo open entries, newest first, and say what happened."""

from __future__ import annotations

import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext.ledger import Entry, Ledger, UndoOutcome, undo

__all__ = ["dead_entries", "shielded", "sweep"]


def dead_entries(ledger: Ledger) -> list[Entry]:
    """Open entries whose owner process is gone (a crashed or killed run)."""
    return [entry for entry in ledger.open_entries() if not entry.owner_alive()]


def sweep(entries: Sequence[Entry], ledger: Ledger, console: Console) -> list[UndoOutcome]:
    """Undo ``entries`` newest first; never stops on a failing undo."""
    outcomes = []
    for entry in sorted(entries, key=lambda e: e.created_at, reverse=True):
        outcome = undo(entry, ledger)
        mark = "[green]✓[/]" if outcome.ok else "[red]✗[/]"
        console.print(
            f"  {mark} undo {entry.kind} on {escape(entry.target)}: {escape(outcome.note)}",
            highlight=False,
        )
        outcomes.append(outcome)
    return outcomes


@contextmanager
def shielded(console: Console) -> Iterator[None]:
    """Keep SIGINT/SIGTERM from cutting a rollback short (they are noted, not obeyed)."""

    def note(signum: int, frame: FrameType | None) -> None:
        console.print(
            f"[yellow]{signal.Signals(signum).name} received: finishing the rollback first[/]"
        )

    previous: dict[signal.Signals, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, note)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
