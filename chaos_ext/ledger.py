"""The fault ledger: every fault is written down before it is injected.

An action calls :func:`record` (or the :func:`fault` context manager) *before*
it changes anything. The entry holds the fault kind, its target, a JSON recipe
for undoing it, the run id, the owner's pid and process start time, and when it
was written. It is stored in SQLite (WAL, ``synchronous=FULL``: the write is
fsync'd before ``record`` returns).

Undo handlers are registered per kind by the module that injects the fault::

    @undo_handler("netem")
    def _undo_netem(entry: Entry) -> str: ...

The handler must be idempotent: undoing a fault that is already gone returns
normally (and says so). :func:`undo` imports the module named in the entry,
runs its handler and closes the entry; a handler that raises leaves the entry
open with the error recorded, for ``gameday rollback`` to retry.

Location: ``$GAMEDAY_LEDGER`` if set, else ``$XDG_STATE_HOME/gameday/ledger.sqlite3``
(default ``~/.local/state/gameday/ledger.sqlite3``). ``gameday --ledger PATH``
sets the variable for one command.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_ext.errors import LedgerError, RollbackFailed

__all__ = [
    "Entry",
    "Ledger",
    "UndoOutcome",
    "add_listener",
    "current_run_id",
    "default_ledger",
    "fault",
    "ledger_path",
    "process_start_time",
    "record",
    "remove_listener",
    "set_current_run_id",
    "undo",
    "undo_after",
    "undo_handler",
]

UndoHandler = Callable[["Entry"], str | None]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    module TEXT NOT NULL,
    recipe TEXT NOT NULL,
    run_id TEXT NOT NULL,
    owner_pid INTEGER NOT NULL,
    owner_start INTEGER,
    created_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'open',
    closed_at REAL,
    note TEXT,
    last_error TEXT
);
CREATE INDEX IF NOT EXISTS entries_state ON entries(state, run_id);
"""

_UNDO_HANDLERS: dict[str, UndoHandler] = {}
Listener = Callable[[str, "Entry"], None]
_LISTENERS: list[Listener] = []
_run_lock = threading.Lock()
_current_run: str | None = None


@dataclass(frozen=True)
class Entry:
    """One recorded fault. ``recipe`` is whatever its undo handler needs."""

    id: str
    kind: str
    target: str
    module: str
    recipe: dict[str, Any] = field(repr=False)
    run_id: str
    owner_pid: int
    owner_start: int | None
    created_at: float
    state: str = "open"
    closed_at: float | None = None
    note: str | None = None
    last_error: str | None = None

    def owner_alive(self) -> bool:
        """True while the process that recorded the entry still runs."""
        start = process_start_time(self.owner_pid)
        if start is None:
            return False
        return self.owner_start is None or start == self.owner_start

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "run_id": self.run_id,
            "owner_pid": self.owner_pid,
            "created_at": self.created_at,
            "state": self.state,
            "closed_at": self.closed_at,
            "note": self.note,
            "last_error": self.last_error,
        }


@dataclass(frozen=True)
class UndoOutcome:
    """What :func:`undo` did with one entry."""

    entry: Entry
    ok: bool
    note: str


def ledger_path() -> Path:
    """Where the ledger lives (see the module docstring)."""
    explicit = os.environ.get("GAMEDAY_LEDGER")
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "gameday" / "ledger.sqlite3"


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None if gone.

    Used with the pid to tell a live owner from a recycled pid.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def set_current_run_id(run_id: str | None) -> None:
    """Set the run id recorded in new entries (the gameday runner does this)."""
    global _current_run  # noqa: PLW0603 - one run per process, read from activity threads
    with _run_lock:
        _current_run = run_id


def current_run_id() -> str:
    """The run id new entries get: the runner's, else one per process."""
    with _run_lock:
        if _current_run:
            return _current_run
    return f"pid-{os.getpid()}-{process_start_time(os.getpid())}"


def add_listener(listener: Listener) -> None:
    """Call ``listener("open" | "closed", entry)`` after each entry this process writes
    or closes (the runner publishes fault windows this way). A listener that raises is
    logged and ignored: it never stops a fault from being recorded or undone."""
    _LISTENERS.append(listener)


def remove_listener(listener: Listener) -> None:
    if listener in _LISTENERS:
        _LISTENERS.remove(listener)


def _notify(event: str, entry: Entry) -> None:
    for listener in list(_LISTENERS):
        try:
            listener(event, entry)
        except Exception:  # an observer never breaks the ledger
            logging.getLogger("chaostoolkit").exception("fault ledger listener failed")


def undo_handler(kind: str) -> Callable[[UndoHandler], UndoHandler]:
    """Register the idempotent undo for a fault ``kind``."""

    def register(func: UndoHandler) -> UndoHandler:
        _UNDO_HANDLERS[kind] = func
        return func

    return register


class Ledger:
    """A ledger file. Each operation opens its own connection: thread and process safe."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or ledger_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(self._connect()) as db, db:
                db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(f"cannot open the fault ledger at {self.path}: {exc}") from exc

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.row_factory = sqlite3.Row
        return db

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        try:
            with closing(self._connect()) as db:
                db.execute("BEGIN IMMEDIATE")
                db.execute(sql, params)
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot write the fault ledger at {self.path}: {exc}") from exc

    def record(
        self,
        *,
        kind: str,
        target: str,
        recipe: dict[str, Any],
        module: str,
        run_id: str | None = None,
    ) -> Entry:
        """Write a new open entry durably and return it."""
        pid = os.getpid()
        entry = Entry(
            id=uuid.uuid4().hex[:16],
            kind=kind,
            target=target,
            module=module,
            recipe=recipe,
            run_id=run_id or current_run_id(),
            owner_pid=pid,
            owner_start=process_start_time(pid),
            created_at=time.time(),
        )
        self._write(
            "INSERT INTO entries (id, kind, target, module, recipe, run_id, owner_pid,"
            " owner_start, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.id, entry.kind, entry.target, entry.module, json.dumps(recipe),
                entry.run_id, entry.owner_pid, entry.owner_start, entry.created_at,
            ),
        )  # fmt: skip
        _notify("open", entry)
        return entry

    def update_recipe(self, entry_id: str, recipe: dict[str, Any]) -> None:
        """Replace an open entry's recipe (e.g. once a helper's pid is known)."""
        self._write("UPDATE entries SET recipe = ? WHERE id = ?", (json.dumps(recipe), entry_id))

    def close(self, entry_id: str, note: str) -> None:
        """Mark an entry undone."""
        self._write(
            "UPDATE entries SET state = 'closed', closed_at = ?, note = ?, last_error = NULL"
            " WHERE id = ?",
            (time.time(), note, entry_id),
        )
        if _LISTENERS:
            closed = self.get(entry_id)
            if closed is not None:
                _notify("closed", closed)

    def mark_error(self, entry_id: str, error: str) -> None:
        """Keep an entry open and remember why its undo failed."""
        self._write("UPDATE entries SET last_error = ? WHERE id = ?", (error, entry_id))

    def get(self, entry_id: str) -> Entry | None:
        rows = self._select("SELECT * FROM entries WHERE id = ?", (entry_id,))
        return rows[0] if rows else None

    def open_entries(self, *, run_id: str | None = None) -> list[Entry]:
        """Open entries, oldest first; only one run's when ``run_id`` is given."""
        if run_id is None:
            return self._select(
                "SELECT * FROM entries WHERE state = 'open' ORDER BY created_at", ()
            )
        return self._select(
            "SELECT * FROM entries WHERE state = 'open' AND run_id = ? ORDER BY created_at",
            (run_id,),
        )

    def history(self, *, run_id: str | None = None, limit: int = 200) -> list[Entry]:
        """All entries (open and closed), newest last."""
        where, params = ("WHERE run_id = ?", (run_id,)) if run_id else ("", ())
        rows = self._select(
            f"SELECT * FROM entries {where} ORDER BY created_at DESC LIMIT ?",  # noqa: S608 - fixed text
            (*params, limit),
        )
        return list(reversed(rows))

    def _select(self, sql: str, params: tuple[Any, ...]) -> list[Entry]:
        try:
            with closing(self._connect()) as db:
                rows = db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot read the fault ledger at {self.path}: {exc}") from exc
        return [_entry_from_row(row) for row in rows]


def _entry_from_row(row: sqlite3.Row) -> Entry:
    data = dict(row)
    data["recipe"] = json.loads(data["recipe"])
    return Entry(**data)


def default_ledger() -> Ledger:
    """The ledger at :func:`ledger_path`."""
    return Ledger(ledger_path())


def record(*, kind: str, target: str, recipe: dict[str, Any], module: str) -> Entry:
    """Record a fault in the default ledger before injecting it."""
    return default_ledger().record(kind=kind, target=target, recipe=recipe, module=module)


def _handler_for(entry: Entry) -> UndoHandler:
    if entry.kind not in _UNDO_HANDLERS:
        try:
            importlib.import_module(entry.module)
        except ImportError as exc:
            raise RollbackFailed(
                f"cannot import {entry.module!r} to undo {entry.kind} on {entry.target}: {exc}"
            ) from exc
    try:
        return _UNDO_HANDLERS[entry.kind]
    except KeyError:
        raise RollbackFailed(
            f"no undo handler registered for fault kind {entry.kind!r} by {entry.module}"
        ) from None


def undo(entry: Entry, ledger: Ledger | None = None) -> UndoOutcome:
    """Undo one entry and close it; on failure keep it open with the error.

    Never raises for a failing handler: the outcome says what happened.
    """
    book = ledger or default_ledger()
    current = book.get(entry.id)
    if current is not None and current.state == "closed":
        return UndoOutcome(entry, True, current.note or "already undone")
    try:
        note = _handler_for(entry)(entry) or "undone"
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, none escapes a sweep
        message = f"{type(exc).__name__}: {exc}"
        book.mark_error(entry.id, message)
        return UndoOutcome(entry, False, message)
    book.close(entry.id, note)
    return UndoOutcome(entry, True, note)


@contextmanager
def fault(*, kind: str, target: str, recipe: dict[str, Any], module: str) -> Iterator[Entry]:
    """Record a fault, then inject it in the ``with`` body.

    If the body raises (a partial injection), the fault is undone at once and
    the error propagates; otherwise the entry stays open until its undo.
    """
    book = default_ledger()
    entry = book.record(kind=kind, target=target, recipe=recipe, module=module)
    try:
        yield entry
    except BaseException:
        latest = book.get(entry.id) or entry
        undo(latest, book)
        raise


def undo_after(entry: Entry, seconds: float) -> threading.Timer:
    """Undo ``entry`` after ``seconds`` in this process (a fault's duration).

    The entry stays in the ledger meanwhile, so a dead process's fault is
    still found by ``gameday rollback``.
    """

    def fire() -> None:
        book = default_ledger()
        latest = book.get(entry.id)
        if latest is not None and latest.state == "open":
            undo(latest, book)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer
