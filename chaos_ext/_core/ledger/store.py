"""The ledger's SQLite database: schema, one transaction per event, full scans, checks.

WAL mode with ``synchronous=FULL``: a committed event is on disk. The
``meta`` table holds the ledger's id and how far into the event log the
database is (``seq``, ``log_size``), written in the same transaction as the
entry it describes, so the two files can be compared at any time.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.ledger.entry import Entry
from chaos_ext._core.ledger.events import Event

__all__ = ["Meta", "apply_event", "connect", "has_schema", "quick_check", "read_meta", "scan"]

SCHEMA = """
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
    last_error TEXT,
    identity TEXT,
    watchdog TEXT
);
CREATE INDEX IF NOT EXISTS entries_state ON entries(state, run_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_COLUMNS = tuple(Entry.__dataclass_fields__)
_JSON_COLUMNS = ("identity", "watchdog")  # JSON text, or NULL


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.row_factory = sqlite3.Row
    return db


def has_schema(db: sqlite3.Connection) -> tuple[bool, bool]:
    """``(entries table exists, meta table exists)``."""
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    return "entries" in names, "meta" in names


def create(db: sqlite3.Connection) -> None:
    """The schema, and the ``identity`` column added to a ledger of an older version."""
    db.executescript(SCHEMA)
    upgrade(db)


_ADDED_COLUMNS = ("identity", "watchdog")  # by later versions, in that order


def upgrade(db: sqlite3.Connection) -> None:
    """Add the columns a ledger of an older version lacks (``identity``, ``watchdog``)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(entries)")}
    for name in _ADDED_COLUMNS:
        if name not in columns:
            db.execute(f"ALTER TABLE entries ADD COLUMN {name} TEXT")


class Meta:
    """``ledger_id``, ``seq`` and ``log_size`` as the database has them."""

    def __init__(self, values: dict[str, str]) -> None:
        self.ledger_id = values.get("ledger_id", "")
        self.seq = int(values.get("seq", "0"))
        self.log_size = int(values.get("log_size", "0"))


def read_meta(db: sqlite3.Connection) -> Meta:
    return Meta({row[0]: row[1] for row in db.execute("SELECT key, value FROM meta")})


def _row_values(entry: Entry) -> tuple[Any, ...]:
    data = entry.to_record()
    data["recipe"] = json.dumps(data["recipe"])
    for name in _JSON_COLUMNS:
        data[name] = None if data[name] is None else json.dumps(data[name])
    return tuple(data[c] for c in _COLUMNS)


def _put(db: sqlite3.Connection, entry: Entry) -> None:
    marks = ", ".join("?" for _ in _COLUMNS)
    db.execute(
        f"INSERT OR REPLACE INTO entries ({', '.join(_COLUMNS)}) VALUES ({marks})",  # noqa: S608 - fixed text
        _row_values(entry),
    )


def _change(db: sqlite3.Connection, event: Event) -> None:
    if event.event in ("record", "adopt"):
        _put(db, Entry.from_record(event.data))
    elif event.event == "recipe":
        db.execute(
            "UPDATE entries SET recipe = ? WHERE id = ?",
            (json.dumps(event.data["recipe"]), event.id),
        )
    elif event.event == "close":
        db.execute(
            "UPDATE entries SET state = 'closed', closed_at = ?, note = ?, last_error = NULL"
            " WHERE id = ?",
            (event.at, event.data.get("note"), event.id),
        )
    elif event.event == "undo-failed":
        db.execute(
            "UPDATE entries SET last_error = ? WHERE id = ?", (event.data.get("error"), event.id)
        )
    elif event.event == "watchdog":
        found = event.data.get("watchdog")
        db.execute(
            "UPDATE entries SET watchdog = ? WHERE id = ?",
            (None if found is None else json.dumps(found), event.id),
        )
    elif event.event == "create":
        db.execute("INSERT OR REPLACE INTO meta VALUES ('ledger_id', ?)", (event.ledger,))


def apply_event(db: sqlite3.Connection, event: Event, log_size: int) -> None:
    """Apply one event and move ``seq``/``log_size`` on, in one transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        _change(db, event)
        db.execute("INSERT OR REPLACE INTO meta VALUES ('seq', ?)", (str(event.seq),))
        db.execute("INSERT OR REPLACE INTO meta VALUES ('log_size', ?)", (str(log_size),))
        db.execute("COMMIT")
        failpoint("ledger.after-commit")
    except BaseException:
        # A signal (KeyboardInterrupt) may land after COMMIT: then there is nothing to roll
        # back, and a failing ROLLBACK must not replace the interrupt with a ledger error.
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def set_position(db: sqlite3.Connection, ledger_id: str, seq: int, log_size: int) -> None:
    """Say how far into the event log (a rebuilt one) the database is."""
    db.execute("BEGIN IMMEDIATE")
    for key, value in (("ledger_id", ledger_id), ("seq", str(seq)), ("log_size", str(log_size))):
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
    db.execute("COMMIT")


def entry_from_row(row: sqlite3.Row) -> Entry:
    data = dict(row)
    data["recipe"] = json.loads(data["recipe"])
    for name in _JSON_COLUMNS:
        data[name] = json.loads(data[name]) if data.get(name) else None
    return Entry.from_record(data)


def scan(db: sqlite3.Connection, where: str = "", params: tuple[Any, ...] = ()) -> list[Entry]:
    """Entries by a full table scan (``NOT INDEXED``): a damaged index cannot hide a row."""
    rows = db.execute(
        f"SELECT * FROM entries NOT INDEXED {where} ORDER BY created_at",  # noqa: S608 - fixed text
        params,
    ).fetchall()
    return [entry_from_row(row) for row in rows]


def scan_rowwise(db: sqlite3.Connection) -> tuple[list[Entry], list[str]]:
    """Best effort on a damaged file: every row that can still be read, one by one."""
    found: list[Entry] = []
    problems: list[str] = []
    try:
        top = db.execute("SELECT max(rowid) FROM entries NOT INDEXED").fetchone()[0] or 0
    except sqlite3.Error as exc:
        return found, [f"entries table unreadable: {exc}"]
    for rowid in range(1, int(top) + 1):
        try:
            row = db.execute(
                "SELECT * FROM entries NOT INDEXED WHERE rowid = ?", (rowid,)
            ).fetchone()
            if row is not None:
                found.append(entry_from_row(row))
        except (sqlite3.Error, ValueError) as exc:
            problems.append(f"entries row {rowid} unreadable: {exc}")
    return found, problems


def quick_check(db: sqlite3.Connection, *, full: bool = False) -> list[str]:
    """SQLite's own check (``quick_check``, or ``integrity_check`` with ``full``)."""
    pragma = "integrity_check" if full else "quick_check"
    try:
        lines = [str(row[0]) for row in db.execute(f"PRAGMA {pragma}(50)")]
    except sqlite3.Error as exc:
        return [f"{pragma}: {exc}"]
    return [] if lines == ["ok"] else [f"{pragma}: {line}" for line in lines]
