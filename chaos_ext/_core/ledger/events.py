"""The event log: an append-only record of every ledger write, beside the database.

One JSON line per event, written and fsync'd *before* the database is
changed, each with the ledger's id, a sequence number (1, 2, 3 ... without
gaps) and a checksum of the line::

    {"seq": 7, "ledger": "…", "at": 1733000000.5, "event": "record", "id": "…",
     "data": {…the whole entry, recipe included…}, "sum": "…"}

Events: ``create`` (the ledger was made), ``record`` (a fault is about to be
injected), ``recipe`` (its recipe was completed), ``close`` (undone),
``undo-failed``, ``adopt`` (an entry taken over whole, by a migration or a
repair), ``watchdog`` (its dead-man switch changed: a timed fault's deadline).
Replaying the log gives every entry and its state without the
database, so a damaged, emptied or deleted database is detected, and
rebuilt (``gameday ledger --repair``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from chaos_ext._core.ledger.entry import Entry

__all__ = ["Event", "LogRead", "append", "encode", "read_log", "replay"]

KINDS = ("create", "record", "recipe", "close", "undo-failed", "adopt", "watchdog")


@dataclass(frozen=True)
class Event:
    """One line of the log."""

    seq: int
    ledger: str
    at: float
    event: str
    id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


def _body(event: Event) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "ledger": event.ledger,
        "at": event.at,
        "event": event.event,
        "id": event.id,
        "data": event.data,
    }


def _sum(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def encode(event: Event) -> bytes:
    """The event as one checksummed line."""
    body = _body(event)
    return (json.dumps({**body, "sum": _sum(body)}, default=str) + "\n").encode()


def append(path: Path, event: Event) -> int:
    """Append ``event`` durably (write, fsync); the log's size afterwards."""
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, encode(event))
        os.fsync(fd)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if created:
        _fsync_dir(path.parent)
    return size


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class LogRead:
    """What reading the log found.

    ``events`` are the lines that are intact; ``valid_size`` is the byte
    length of the intact prefix (up to the first damaged line);
    ``torn_tail`` says the last line is incomplete or damaged (a write cut
    short); ``problems`` lists everything else that is wrong.
    """

    events: list[Event]
    valid_size: int
    torn_tail: bool
    problems: list[str]
    ends: list[int] = field(default_factory=list)  # byte offset after each event


def _decode(line: bytes) -> Event | str:
    try:
        raw = json.loads(line)
        stored = raw.pop("sum")
        if stored != _sum(raw):
            return "checksum mismatch"
        if raw["event"] not in KINDS:
            return f"unknown event {raw['event']!r}"
        return Event(**raw)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"unreadable ({type(exc).__name__})"


def read_log(path: Path, *, start: int = 0, after_seq: int = 0, ledger_id: str = "") -> LogRead:
    """Read and check the log from byte ``start`` (whose last seq was ``after_seq``)."""
    with path.open("rb") as handle:
        handle.seek(start)
        data = handle.read()
    events: list[Event] = []
    ends: list[int] = []
    problems: list[str] = []
    pos, valid_size, expected, intact = 0, start, after_seq + 1, True
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end == -1:  # no newline: a write cut short
            return LogRead(events, valid_size, True, problems, ends)
        where, found, pos = start + pos, _decode(data[pos:end]), end + 1
        if isinstance(found, str):
            if pos >= len(data):  # the last line is damaged: a write cut short
                return LogRead(events, valid_size, True, problems, ends)
            problems.append(f"event log byte {where}: {found}")
            intact = False
            continue
        if ledger_id and found.ledger != ledger_id:
            problems.append(f"event log byte {where}: belongs to ledger {found.ledger}")
            intact = False
        if found.seq != expected:
            problems.append(f"event log byte {where}: sequence {found.seq}, expected {expected}")
            intact = False
        expected = found.seq + 1
        events.append(found)
        ends.append(start + pos)
        if intact:
            valid_size = start + pos
    return LogRead(events, valid_size, False, problems, ends)


def replay(events: Iterable[Event]) -> dict[str, Entry]:
    """Every entry the events describe, in its latest state."""
    entries: dict[str, Entry] = {}
    for event in events:
        if event.event in ("record", "adopt"):
            entries[str(event.id)] = Entry.from_record(event.data)
            continue
        current = entries.get(str(event.id))
        if current is None:
            continue
        if event.event == "recipe":
            entries[current.id] = replace(current, recipe=event.data["recipe"])
        elif event.event == "close":
            entries[current.id] = replace(
                current,
                state="closed",
                closed_at=event.at,
                note=event.data.get("note"),
                last_error=None,
            )
        elif event.event == "undo-failed":
            entries[current.id] = replace(current, last_error=event.data.get("error"))
        elif event.event == "watchdog":
            entries[current.id] = replace(current, watchdog=event.data.get("watchdog"))
    return entries
