"""Reading and writing the ledger's three parts (database, event log, marker) in step.

Every operation holds an exclusive ``flock`` on ``<ledger>.lock`` and first
makes sure the parts agree cheaply (:meth:`Book.ensure`): the database
exists and has the marker's ledger id, and the event log is exactly as long
as the database says. A log that is longer (a writer killed between its two
writes) is rolled forward into the database; a cut-short last line is
dropped. Anything else raises :class:`~chaos_ext.errors.LedgerInconsistent`
with what may still be open, so nothing is ever recorded into, or read
from, a ledger that cannot be trusted.

A write appends the event to the log (fsync), then applies it to the
database in one transaction, then moves the marker on.
"""

from __future__ import annotations

import fcntl
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.ledger import store
from chaos_ext._core.ledger.entry import Entry
from chaos_ext._core.ledger.events import Event, append, read_log, replay
from chaos_ext._core.ledger.marker import read_marker, write_marker
from chaos_ext.errors import LedgerError, LedgerInconsistent

__all__ = ["Book", "events_path", "hold_lock", "log_suspects"]


def events_path(ledger: Path) -> Path:
    """The event log beside the database: ``<ledger>.events.jsonl``."""
    return ledger.with_name(ledger.name + ".events.jsonl")


def lock_path(ledger: Path) -> Path:
    return ledger.with_name(ledger.name + ".lock")


@contextmanager
def hold_lock(ledger: Path) -> Iterator[None]:
    """The ledger's exclusive lock (released by the kernel if the holder dies)."""
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with lock_path(ledger).open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield


def log_suspects(ledger: Path) -> list[dict[str, Any]]:
    """Entries the event log shows open (best effort, for error messages)."""
    log = events_path(ledger)
    if not log.exists():
        return []
    try:
        entries = replay(read_log(log).events)
    except OSError:
        return []
    return [e.as_dict() for e in entries.values() if e.state == "open"]


_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


class Book:
    """One ledger's files. Thread and process safe: every call locks and reconnects."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.log = events_path(path)

    @contextmanager
    def locked(self) -> Iterator[sqlite3.Connection | None]:
        """Hold the ledger's lock; yields a connection if the database file exists."""
        with hold_lock(self.path):
            if _size(self.path) <= 0:
                yield None
                return
            with closing(store.connect(self.path)) as db:
                yield db

    def _inconsistent(self, problem: str) -> LedgerInconsistent:
        return LedgerInconsistent(
            f"the fault ledger at {self.path} cannot be trusted: {problem}; it may not list"
            " every open fault. Run `gameday ledger --verify` to see what may still be"
            " injected, `gameday ledger --repair` to rebuild it",
            [problem],
            log_suspects(self.path),
        )

    def _damaged(self, exc: sqlite3.DatabaseError) -> LedgerError:
        if getattr(exc, "sqlite_errorcode", None) in _DAMAGED:
            return self._inconsistent(f"the database is damaged ({exc})")
        return LedgerError(f"cannot use the fault ledger at {self.path}: {exc}")

    def ensure(self, db: sqlite3.Connection | None) -> tuple[sqlite3.Connection, store.Meta]:
        """With the lock held: the parts agree (or are made so), or LedgerInconsistent."""
        marker = read_marker(self.path)
        if db is None:
            if marker is not None or _size(self.log) > 0:
                what = "missing" if _size(self.path) < 0 else "empty (0 bytes)"
                raise self._inconsistent(f"the database is {what} but the ledger existed")
            return self._create()
        tables = store.has_schema(db)
        if not tables[1]:
            if marker is not None or _size(self.log) > 0:
                raise self._inconsistent("the database has no ledger id (replaced or emptied)")
            return db, self._migrate(db, has_entries=tables[0])
        meta = store.read_meta(db)
        if marker is not None and marker.get("ledger_id") != meta.ledger_id:
            found = marker.get("ledger_id") or marker.get("unreadable")
            raise self._inconsistent(
                f"the database is ledger {meta.ledger_id}, its marker says {found}"
            )
        meta = self._roll_forward(db, meta)
        if marker is not None and int(marker.get("seq", 0)) > meta.seq:
            raise self._inconsistent(
                f"the marker has seen {marker['seq']} events, the ledger only {meta.seq}"
            )
        if marker is None:
            write_marker(self.path, meta.ledger_id, meta.seq)
        return db, meta

    def _create(self) -> tuple[sqlite3.Connection, store.Meta]:
        ledger_id = uuid.uuid4().hex
        self.log.unlink(missing_ok=True)  # an empty leftover (no marker, no events)
        db = store.connect(self.path)
        store.create(db)
        event = Event(1, ledger_id, time.time(), "create", None, {"path": str(self.path)})
        store.apply_event(db, event, append(self.log, event))
        write_marker(self.path, ledger_id, 1)
        return db, store.read_meta(db)

    def _migrate(self, db: sqlite3.Connection, *, has_entries: bool) -> store.Meta:
        """A ledger of an older version (no event log): give it one, from its rows."""
        store.create(db)
        ledger_id = uuid.uuid4().hex
        self.log.unlink(missing_ok=True)
        rows = store.scan(db) if has_entries else []
        now = time.time()
        events = [Event(1, ledger_id, now, "create", None, {"path": str(self.path)})]
        events += [
            Event(i + 2, ledger_id, now, "adopt", e.id, e.to_record()) for i, e in enumerate(rows)
        ]
        for event in events:
            store.apply_event(db, event, append(self.log, event))
        write_marker(self.path, ledger_id, len(events))
        return store.read_meta(db)

    def _roll_forward(self, db: sqlite3.Connection, meta: store.Meta) -> store.Meta:
        size = _size(self.log)
        if size < meta.log_size:
            what = "missing" if size < 0 else f"{size} bytes, the database expects {meta.log_size}"
            raise self._inconsistent(f"the event log is {what}")
        if size == meta.log_size:
            return meta
        found = read_log(
            self.log, start=meta.log_size, after_seq=meta.seq, ledger_id=meta.ledger_id
        )
        if found.problems:
            raise self._inconsistent("; ".join(found.problems[:3]))
        for event, end in zip(found.events, found.ends, strict=True):
            store.apply_event(db, event, end)
        if found.torn_tail:  # a write cut short: the database never saw it
            with self.log.open("r+b") as handle:
                handle.truncate(found.valid_size)
        return store.read_meta(db)

    def write(self, kind: str, entry_id: str | None, data: dict[str, Any]) -> Event:
        """Append one event to the log, then to the database, then move the marker."""
        try:
            with self.locked() as existing:
                db, meta = self.ensure(existing)
                store.upgrade(db)  # a ledger of an older version: its new columns
                event = Event(meta.seq + 1, meta.ledger_id, time.time(), kind, entry_id, data)
                size = append(self.log, event)
                failpoint("ledger.after-log")
                store.apply_event(db, event, size)
                write_marker(self.path, meta.ledger_id, event.seq)
                if existing is None:
                    db.close()
                return event
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from exc
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(f"cannot write the fault ledger at {self.path}: {exc}") from exc

    def open(self) -> None:
        """Create the ledger, or prove its parts agree (LedgerInconsistent otherwise)."""
        try:
            with self.locked() as existing:
                db, _ = self.ensure(existing)
                if existing is None:
                    db.close()
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from exc
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(f"cannot open the fault ledger at {self.path}: {exc}") from exc

    def select(self, where: str = "", params: tuple[Any, ...] = ()) -> list[Entry]:
        """Entries by a full table scan, after the cheap agreement check."""
        try:
            with self.locked() as existing:
                db, _ = self.ensure(existing)
                rows = store.scan(db, where, params)
                if existing is None:
                    db.close()
                return rows
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from exc
        except (OSError, sqlite3.Error, ValueError) as exc:
            raise LedgerError(f"cannot read the fault ledger at {self.path}: {exc}") from exc
