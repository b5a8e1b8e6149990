"""Ledger actions: undo recorded faults from inside an experiment."""

from __future__ import annotations

from typing import Any

from chaos_ext.errors import RollbackFailed
from chaos_ext.ledger import current_run_id, default_ledger, undo
from chaos_ext.validation import validated_by

__all__ = ["rollback_faults"]


@validated_by()
def rollback_faults(this_run_only: bool = True) -> dict[str, Any]:
    """Undo the faults recorded in the gameday ledger (use it in "rollbacks").

    Blast radius: with ``this_run_only`` (the default) only faults recorded by
    this run; otherwise every open fault in the ledger, newest first. It is
    its own rollback (idempotent). Gives plain ``chaos run`` the same sweep
    that ``gameday run`` does by itself. Raises RollbackFailed if an undo fails
    (the entry stays open for ``gameday rollback``).
    """
    book = default_ledger()
    entries = book.open_entries(run_id=current_run_id() if this_run_only else None)
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
