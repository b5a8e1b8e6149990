"""Every ledger on this machine, and the open entries they hold.

A sweep of things without a ledger entry must not take what another ledger
records: two runs may use two ledger files (``GAMEDAY_LEDGER``). Ledgers are
found by their markers: every ledger writes one into ``markers_dir()``
(``$GAMEDAY_LEDGER_MARKERS``), naming its path. A ledger kept with its
markers in another folder is still seen while it holds an open entry: every
open entry is also registered for this boot (:mod:`.registry`).

Other ledgers are read, not repaired: a database that does not agree with
its parts is read from its event log instead; a ledger whose database and
event log are both gone lost its entries (what it held is exactly what a
sweep is for); one that exists but cannot be read at all is reported
``unreadable``, and a careful caller then touches nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from chaos_ext._core.ledger.book import Book, events_path
from chaos_ext._core.ledger.entry import Entry
from chaos_ext._core.ledger.events import read_log, replay
from chaos_ext._core.ledger.marker import markers_dir
from chaos_ext._core.ledger.registry import registered
from chaos_ext.errors import LedgerError

__all__ = ["Census", "census", "known_ledgers"]


@dataclass(frozen=True)
class Census:
    """Open entries of every ledger found: ``(ledger path, entry)``; what could not be read."""

    entries: list[tuple[Path, Entry]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[tuple[Path, Entry]]:
        return [(path, entry) for path, entry in self.entries if entry.kind == kind]


def _named_by(marker: Path) -> Path | None:
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    ledger = data.get("ledger") if isinstance(data, dict) else None
    return Path(ledger) if isinstance(ledger, str) and ledger else None


def known_ledgers(current: Path) -> list[Path]:
    """``current`` first, then every ledger a marker names, then every ledger that
    registered an open entry on this boot (:mod:`.registry`); each path once."""
    found = [current.absolute()]
    folder = markers_dir()
    markers = sorted(folder.glob("*.json")) if folder.is_dir() else []
    named = [_named_by(marker) for marker in markers]
    for path in [*named, *sorted(set(registered().values()))]:
        if path is not None and path.absolute() not in found:
            found.append(path.absolute())
    return found


def _from_log(path: Path) -> list[Entry] | None:
    log = events_path(path)
    try:
        entries = replay(read_log(log).events)
    except OSError:
        return None
    return [e for e in entries.values() if e.state == "open"]


def _open_in(path: Path) -> tuple[list[Entry], str | None]:
    """Open entries of one ledger (read-only unless it is consistent); why not, if unreadable."""
    if not path.exists() and not events_path(path).exists():
        return [], None  # lost: nothing left to read
    try:
        return Book(path).select("WHERE state = 'open'"), None
    except LedgerError as exc:
        from_log = _from_log(path)
        if from_log is not None:
            return from_log, None
        return [], f"{path}: {exc}"


def census(current: Path, kinds: Iterable[str] = ()) -> Census:
    """Open entries (of ``kinds``; empty: all) in every ledger :func:`known_ledgers` finds."""
    wanted = set(kinds)
    result = Census()
    for path in known_ledgers(current):
        entries, problem = _open_in(path)
        if problem:
            result.unreadable.append(problem)
        result.entries.extend((path, e) for e in entries if not wanted or e.kind in wanted)
    return result
