"""The full check of a ledger (``gameday ledger --verify``) and its repair (``--repair``).

:func:`verify` looks at everything, without trusting any one part:

* the database: SQLite's ``quick_check`` (``integrity_check`` with ``full``),
  then its rows by a full table scan (row by row if that fails too);
* the event log: every line's checksum, the sequence without gaps, the
  ledger id, and the entries it replays to;
* the marker: that the ledger it vouches for is there, with as many events;
* the reconciliation: every entry in both, in the same state, with the same
  recipe and identity.

Its verdict lists the problems and the *suspects*: every entry that either
copy shows open, i.e. what may still be injected. :func:`repair` rebuilds
the damaged part from the intact one (the database from the log, or the
log from a sound database), keeping the damaged files aside.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from chaos_ext._core.ledger import store
from chaos_ext._core.ledger.book import Book, events_path, hold_lock
from chaos_ext._core.ledger.entry import Entry
from chaos_ext._core.ledger.events import Event, append, read_log, replay
from chaos_ext._core.ledger.marker import read_marker, write_marker
from chaos_ext.errors import LedgerInconsistent

__all__ = ["Verdict", "repair", "verify"]

_COMPARED = ("state", "kind", "target", "recipe", "identity", "run_id", "watchdog")


@dataclass
class Verdict:
    """What :func:`verify` found. ``ok`` only when nothing at all is wrong."""

    path: Path
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    db_entries: dict[str, Entry] | None = None
    log_entries: dict[str, Entry] | None = None
    ledger_id: str = ""
    db_seq: int = -1
    log_seq: int = -1
    db_sound: bool = False
    log_sound: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def suspects(self) -> list[Entry]:
        """Entries that either copy shows open (the log's version when it has one)."""
        db, log = self.db_entries or {}, self.log_entries or {}
        ids = {i for i, e in db.items() if e.state == "open"}
        ids |= {i for i, e in log.items() if e.state == "open"}
        return sorted((log.get(i) or db[i] for i in ids), key=lambda e: e.created_at)


def _read_db(path: Path, verdict: Verdict, *, full: bool) -> None:
    size = path.stat().st_size if path.exists() else -1
    if size <= 0:
        verdict.problems.append(f"the database is {'missing' if size < 0 else 'empty (0 bytes)'}")
        return
    try:
        with closing(store.connect(path)) as db:
            damage = store.quick_check(db, full=full)
            verdict.problems += damage
            try:
                meta = store.read_meta(db)
                rows = store.scan(db)
            except (sqlite3.Error, ValueError) as exc:
                verdict.problems.append(f"the database cannot be read by a full scan: {exc}")
                rows, lost = store.scan_rowwise(db)
                verdict.problems += lost
                verdict.db_entries = {e.id: e for e in rows}
                return
    except sqlite3.Error as exc:
        verdict.problems.append(f"the database cannot be opened: {exc}")
        return
    verdict.db_entries = {e.id: e for e in rows}
    verdict.db_seq, verdict.ledger_id = meta.seq, meta.ledger_id
    verdict.db_sound = not damage and bool(meta.ledger_id)
    if not meta.ledger_id:
        verdict.problems.append("the database has no ledger id (replaced or emptied)")


def _read_events(log: Path, verdict: Verdict) -> None:
    if not log.exists():
        verdict.problems.append(f"the event log {log.name} is missing")
        return
    found = read_log(log, ledger_id=verdict.ledger_id)
    verdict.problems += found.problems
    if found.torn_tail:
        verdict.notes.append("the event log's last line was cut short (an interrupted write)")
    if not found.events or found.events[0].event != "create":
        verdict.problems.append("the event log does not start with the ledger's creation")
    verdict.log_entries = replay(found.events)
    verdict.log_seq = found.events[-1].seq if found.events else 0
    verdict.log_sound = not found.problems and bool(found.events)
    if found.events and not verdict.ledger_id:
        verdict.ledger_id = found.events[0].ledger


def _read_marker(verdict: Verdict) -> None:
    marker = read_marker(verdict.path)
    if marker is None:
        verdict.notes.append("no marker for this ledger (written again on the next write)")
        return
    if "unreadable" in marker:
        verdict.problems.append(f"the marker is unreadable: {marker['unreadable']}")
        return
    if verdict.ledger_id and marker.get("ledger_id") != verdict.ledger_id:
        verdict.problems.append(
            f"the marker vouches for ledger {marker.get('ledger_id')}, this is {verdict.ledger_id}"
        )
    known = max(verdict.db_seq, verdict.log_seq)
    if int(marker.get("seq", 0)) > known:
        verdict.problems.append(
            f"the marker has seen {marker.get('seq')} events, the ledger keeps {max(known, 0)}"
        )


def _reconcile(verdict: Verdict) -> None:
    if 0 <= verdict.db_seq != verdict.log_seq >= 0:
        verdict.problems.append(
            f"the database has {verdict.db_seq} events, the event log {verdict.log_seq}"
        )
    db, log = verdict.db_entries, verdict.log_entries
    if db is None or log is None:
        return
    for entry_id in sorted(set(db) | set(log)):
        a, b = db.get(entry_id), log.get(entry_id)
        shown = a or b
        assert shown is not None  # noqa: S101 - one of them is there
        if a is None or b is None:
            where = "database" if a is None else "event log"
            verdict.problems.append(
                f"entry {entry_id} ({shown.kind} on {shown.target}, {shown.state}) is missing"
                f" from the {where}"
            )
            continue
        for name in _COMPARED:
            if getattr(a, name) != getattr(b, name):
                verdict.problems.append(
                    f"entry {entry_id} ({shown.kind} on {shown.target}): {name} differs between"
                    " the database and the event log"
                )


def verify(path: Path, *, full: bool = False) -> Verdict:
    """Check everything (see the module docstring). Rolls a crashed write forward first."""
    verdict = Verdict(path)
    book = Book(path)
    try:
        with book.locked() as existing:
            db, _ = book.ensure(existing)
            if existing is None:
                db.close()
    except (LedgerInconsistent, sqlite3.Error):
        pass  # the detailed look below says why
    with hold_lock(path):
        _read_db(path, verdict, full=full)
        _read_events(events_path(path), verdict)
        _read_marker(verdict)
        _reconcile(verdict)
    return verdict


def _aside(path: Path, stamp: str) -> list[str]:
    moved = []
    for part in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if part.exists():
            target = part.with_name(f"{part.name}.damaged-{stamp}")
            part.replace(target)
            moved.append(target.name)
    return moved


def _write_db(path: Path, events: list[Event], ends: list[int]) -> None:
    tmp = path.with_name(f".{path.name}.repair")
    for stale in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
        stale.unlink(missing_ok=True)
    with closing(store.connect(tmp)) as db:
        store.create(db)
        for event, end in zip(events, ends, strict=True):
            store.apply_event(db, event, end)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tmp.replace(path)
    for suffix in ("-wal", "-shm"):
        tmp.with_name(tmp.name + suffix).unlink(missing_ok=True)


def _new_log(path: Path, ledger_id: str, entries: list[Entry], stamp: str) -> list[str]:
    """Keep the old log aside; write one holding ``entries`` whole (``adopt``)."""
    log = events_path(path)
    kept = []
    if log.exists():
        target = log.with_name(f"{log.name}.damaged-{stamp}")
        log.replace(target)
        kept.append(target.name)
    now = time.time()
    events = [Event(1, ledger_id, now, "create", None, {"path": str(path), "repaired": True})]
    events += [
        Event(i + 2, ledger_id, now, "adopt", e.id, e.to_record()) for i, e in enumerate(entries)
    ]
    end = 0
    for event in events:
        end = append(log, event)
    with closing(store.connect(path)) as db:
        store.set_position(db, ledger_id, events[-1].seq, end)
    write_marker(path, ledger_id, events[-1].seq)
    return kept


def repair(path: Path, *, accept_loss: bool = False) -> list[str]:
    """Rebuild what is damaged from what is intact; what was done, line by line.

    Raises LedgerInconsistent when neither copy is intact, unless
    ``accept_loss``: then every entry still readable anywhere is kept (an
    entry open in either copy stays open) in a new ledger.
    """
    verdict = verify(path)
    if verdict.ok:
        return ["nothing to repair: the ledger is consistent"]
    stamp = time.strftime("%Y%m%dT%H%M%S")
    marker = read_marker(path) or {}
    marker_seq = 0 if "unreadable" in marker else int(marker.get("seq", 0))
    with hold_lock(path):
        if verdict.log_sound and verdict.log_seq >= marker_seq:
            found = read_log(events_path(path))
            moved = _aside(path, stamp)
            _write_db(path, found.events, found.ends)
            write_marker(path, found.events[0].ledger, found.events[-1].seq)
            return [
                f"rebuilt the database from the event log ({len(found.events)} events,"
                f" {len(verdict.log_entries or {})} entries)",
                *(f"kept the damaged file as {name}" for name in moved),
            ]
        if verdict.db_sound and verdict.db_seq >= marker_seq:
            entries = sorted((verdict.db_entries or {}).values(), key=lambda e: e.created_at)
            kept = _new_log(path, verdict.ledger_id, entries, stamp)
            return [
                f"rebuilt the event log from the database ({len(entries)} entries)",
                *(f"kept the damaged log as {name}" for name in kept),
            ]
        if not accept_loss:
            raise LedgerInconsistent(
                f"cannot repair {path} without losing track of faults: neither the database"
                " nor the event log is intact. Check the suspects by hand, then run"
                " `gameday ledger --repair --accept-loss` to keep every entry still readable",
                verdict.problems,
                [e.as_dict() for e in verdict.suspects],
            )
        return _salvage(path, verdict, stamp)


def _salvage(path: Path, verdict: Verdict, stamp: str) -> list[str]:
    merged = dict(verdict.db_entries or {})
    for entry_id, entry in (verdict.log_entries or {}).items():
        if entry_id not in merged or entry.state == "open":
            merged[entry_id] = entry
    entries = sorted(merged.values(), key=lambda e: e.created_at)
    moved = _aside(path, stamp)
    ledger_id = uuid.uuid4().hex
    with closing(store.connect(path)) as db:
        store.create(db)
        for entry in entries:
            store.apply_event(
                db, Event(0, ledger_id, time.time(), "adopt", entry.id, entry.to_record()), 0
            )
    moved += _new_log(path, ledger_id, entries, stamp)
    still = sum(1 for e in entries if e.state == "open")
    return [
        f"started ledger {ledger_id} from every entry still readable: {len(entries)} entries,"
        f" {still} open (run `gameday rollback` next)",
        *(f"kept {name}" for name in moved),
    ]
