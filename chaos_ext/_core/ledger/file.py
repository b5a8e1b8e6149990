"""The :class:`Ledger`: one ledger file, its entries written and read under one lock.

Where the default one lives (:func:`ledger_path`), the ids of new entries and
the identity of a fault held on this machine (:func:`machine_scope`). The
package (:mod:`chaos_ext._core.ledger`) exports all of it.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.ledger import check
from chaos_ext._core.ledger.book import Book, events_path
from chaos_ext._core.ledger.entry import Entry, process_start_time
from chaos_ext._core.ledger.machine import machine_identity
from chaos_ext._core.ledger.process import LISTENERS, current_run_id, remember
from chaos_ext._core.ledger.registry import register, unregister
from chaos_ext._core.settings import current_settings
from chaos_ext.errors import LedgerError

__all__ = ["Ledger", "ledger_path", "machine_scope", "new_entry_id"]


def ledger_path() -> Path:
    """Where the ledger lives: ``--ledger`` (the command's Settings), else ``$GAMEDAY_LEDGER``,
    else ``$XDG_STATE_HOME/gameday/ledger.sqlite3`` (see :mod:`chaos_ext._core.ledger`)."""
    explicit = current_settings().ledger or os.environ.get("GAMEDAY_LEDGER")
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "gameday" / "ledger.sqlite3"


def new_entry_id() -> str:
    """A fresh entry id, for a recipe that must name its own entry before it is recorded."""
    return uuid.uuid4().hex[:16]


def machine_scope(**details: Any) -> dict[str, Any]:
    """The identity of a fault held on this machine (helpers, namespaces, local qdiscs).

    ``details`` say more about what it acts on (e.g. the database server it
    holds connections to); the undo is allowed on this machine only.
    """
    return {"scope": "machine", "machine": machine_identity(), **details}


class Ledger:
    """A ledger. Each operation locks, checks and reconnects: thread and process safe."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or ledger_path()
        self._book = Book(self.path)
        self._book.open()

    @classmethod
    def existing(cls, path: Path) -> Ledger:
        """The ledger at ``path`` if it exists; LedgerError if it is gone (never a new one)."""
        if not path.exists() and not events_path(path).exists():
            raise LedgerError(f"the fault ledger at {path} is gone (database and event log)")
        return cls(path)

    def record(
        self,
        *,
        kind: str,
        target: str,
        recipe: dict[str, Any],
        module: str,
        run_id: str | None = None,
        identity: dict[str, Any] | None = None,
        entry_id: str | None = None,
        watchdog: dict[str, Any] | None = None,
    ) -> Entry:
        """Write a new open entry durably (event log, then database) and return it."""
        failpoint(f"{kind}.before-entry")
        pid = os.getpid()
        here = {"recorded_on": machine_identity()}
        entry = Entry(
            id=entry_id or new_entry_id(),
            kind=kind,
            target=target,
            module=module,
            recipe=recipe,
            run_id=run_id or current_run_id(),
            owner_pid=pid,
            owner_start=process_start_time(pid),
            created_at=time.time(),
            identity={**(identity or machine_scope()), **here},
            watchdog=watchdog,
        )
        register(entry.id, self.path)  # before the entry: what it owns is never unowned
        self._book.write("record", entry.id, entry.to_record())
        remember(entry)
        LISTENERS.notify("open", entry)
        return entry

    def update_recipe(self, entry_id: str, recipe: dict[str, Any]) -> None:
        """Replace an open entry's recipe (e.g. to add a helper's pid, for information)."""
        self._book.write("recipe", entry_id, {"recipe": recipe})

    def set_watchdog(self, entry_id: str, watchdog: dict[str, Any]) -> None:
        """Replace an open entry's watchdog record (a timed fault's deadline, once known)."""
        self._book.write("watchdog", entry_id, {"watchdog": watchdog})

    def close(self, entry_id: str, note: str) -> None:
        """Mark an entry undone."""
        self._book.write("close", entry_id, {"note": note})
        unregister(entry_id)
        if LISTENERS:
            closed = self.get(entry_id)
            if closed is not None:
                LISTENERS.notify("closed", closed)

    def mark_error(self, entry_id: str, error: str) -> None:
        """Keep an entry open and remember why its undo failed."""
        self._book.write("undo-failed", entry_id, {"error": error})

    def get(self, entry_id: str) -> Entry | None:
        rows = self._book.select("WHERE id = ?", (entry_id,))
        return rows[0] if rows else None

    def open_entries(self, *, run_id: str | None = None) -> list[Entry]:
        """Open entries, oldest first; only one run's when ``run_id`` is given."""
        if run_id is None:
            return self._book.select("WHERE state = 'open'")
        return self._book.select("WHERE state = 'open' AND run_id = ?", (run_id,))

    def history(self, *, run_id: str | None = None, limit: int = 200) -> list[Entry]:
        """All entries (open and closed), newest last."""
        rows = self._book.select("WHERE run_id = ?", (run_id,)) if run_id else self._book.select()
        return rows[-limit:]

    def verify(self, *, full: bool = False) -> check.Verdict:
        """The full check: SQLite's own, the event log, the marker, reconciled."""
        return check.verify(self.path, full=full)
