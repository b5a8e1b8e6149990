"""Ledger actions: undo recorded faults from inside an experiment."""

from __future__ import annotations

from typing import Any

from chaos_ext.errors import RollbackFailed
from chaos_ext.ledger import default_ledger, in_scope, undo
from chaos_ext.validation import validated_by

__all__ = ["rollback_faults"]


@validated_by()
def rollback_faults(include_dead_runs: bool = False) -> dict[str, Any]:
    """Undo the faults this run recorded in the gameday ledger (use it in "rollbacks").

    Blast radius: by default only faults recorded by this run, newest first.
    ``include_dead_runs`` also undoes faults left open by runs whose runner
    is dead (killed, crashed); a live run's faults are never touched, it
    undoes them itself. It is its own rollback (idempotent). Gives plain
    ``chaos run`` the same sweep that ``gameday run`` does by itself. Raises
    RollbackFailed if an undo fails (the entry stays open for ``gameday
    rollback``).
    """
    book = default_ledger()
    entries = in_scope(book.open_entries(), include_dead_runs=include_dead_runs)
    outcomes = [undo(entry, book) for entry in reversed(entries)]
    failed = [f"{o.entry.kind} on {o.entry.target}: {o.note}" for o in outcomes if not o.ok]
    if failed:
        raise RollbackFailed("could not undo: " + "; ".join(failed))
    return {
        "undone": len(outcomes),
        "faults": [
            {"kind": o.entry.kind, "target": o.entry.target, "note": o.note} for o in outcomes
        ],
    }
