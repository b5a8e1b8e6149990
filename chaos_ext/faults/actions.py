"""Ledger actions: undo recorded faults from inside an experiment."""

from __future__ import annotations

from typing import Any

from chaos_ext._core.contract import Configuration, Secrets, roll_back, rollback_activity
from chaos_ext._core.ledger import default_ledger
from chaos_ext._core.validation import validated_by

__all__ = ["rollback_faults"]


@rollback_activity
@validated_by()
def rollback_faults(
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Undo the faults this run recorded in the gameday ledger, of every kind (a rollback).

    Blast radius: by default only faults recorded by this run, newest first.
    ``include_dead_runs`` also undoes faults left open by runs whose runner
    is dead (killed, crashed); a live run's faults are never touched, it
    undoes them itself (listed under ``left_alone``). It is its own rollback
    (idempotent). Gives plain ``chaos run`` the same sweep that ``gameday
    run`` does by itself. Raises RollbackFailed if an undo fails (the entry
    stays open for ``gameday rollback``). Returns ``undone``, ``faults`` and
    ``left_alone`` (docs/conventions.md).
    """
    book = default_ledger()
    return roll_back(book.open_entries(), book, include_dead_runs=include_dead_runs)
