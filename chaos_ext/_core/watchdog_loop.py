"""The watchdog process of one ledger entry (see :mod:`chaos_ext._core.watchdog`).

``python -m chaos_ext._core.watchdog_loop SETTINGS_JSON``, started by
:func:`chaos_ext._core.watchdog.start_watchdog` before the entry is recorded. It
polls its owner in ``/proc`` every :data:`POLL_S` seconds and its entry in
the ledger when the event log has changed (or every :data:`REREAD_S`), and
ends:

* when the entry is closed (by its run, ``gameday rollback``, anyone);
* after it undid the entry, or found it undone by someone else meanwhile;
* after :data:`UNDO_ATTEMPTS` failed undos (the entry stays open with its
  error, for ``gameday rollback``);
* when the owner is dead and there is nothing for it to do (no deadline and
  the grace off), or the entry never appeared within :data:`APPEAR_S`.

It never undoes the fault of a live owner. Each decision is one line on its
stdout (``<ledger folder>/helpers/<entry id>.watchdog.log``).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.ledger import Entry, Ledger, undo, undo_unrecorded
from chaos_ext._core.ledger.book import Book, events_path
from chaos_ext.errors import LedgerError

__all__ = ["APPEAR_S", "POLL_S", "REREAD_S", "UNDO_ATTEMPTS", "main"]

POLL_S = 0.25
REREAD_S = 5.0
APPEAR_S = 30.0
UNDO_ATTEMPTS = 5
RETRY_S = 5.0


def _say(text: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    print(f"{stamp} watchdog pid {os.getpid()}: {text}", flush=True)  # noqa: T201 - its log


def _log_stamp(path: Path) -> tuple[int, int]:
    try:
        found = events_path(path).stat()
    except FileNotFoundError:
        return (-1, -1)
    return (found.st_size, found.st_mtime_ns)


def _read(path: Path, entry_id: str) -> Entry | None:
    """The entry as the ledger has it; LedgerError if the ledger cannot be read or is gone."""
    if not path.exists() and not events_path(path).exists():
        raise LedgerError(f"the ledger at {path} is gone")  # never create a new one
    rows = Book(path).select("WHERE id = ?", (entry_id,))
    return rows[0] if rows else None


def _owner_alive(pid: int, start: int | None) -> bool:
    found = _procfs.stat(pid)
    if found is None or found.zombie:
        return False
    return start is None or found.start_time == start


@dataclass
class Watch:
    """What the watchdog knows: its settings, the entry as last read, when the owner died."""

    path: Path
    entry_id: str
    owner: tuple[int, int | None]
    grace: float
    started: float
    entry: Entry | None = None
    stamp: tuple[int, int] = (-2, -2)
    read_at: float = 0.0
    dead_since: float | None = None
    attempts: int = 0
    next_try: float = 0.0

    def refresh(self, now: float) -> None:
        stamp = _log_stamp(self.path)
        if self.entry is not None and stamp == self.stamp and now - self.read_at < REREAD_S:
            return
        try:
            found = _read(self.path, self.entry_id)
        except LedgerError as exc:
            if self.read_at == 0.0 or now - self.read_at >= REREAD_S:
                _say(f"cannot read the ledger ({exc}); keeping the entry as last read")
                self.read_at = now
            return
        self.stamp, self.read_at = stamp, now
        if found is not None:
            self.entry = found

    def deadline(self) -> float | None:
        info = (self.entry.watchdog if self.entry is not None else None) or {}
        value = info.get("deadline")
        return float(value) if isinstance(value, int | float) else None

    def due(self) -> float | None:
        """When a dead owner's fault is to be undone (None: not by this watchdog)."""
        if self.dead_since is None:
            return None
        found = [t for t in (self.deadline(),) if t is not None]
        if self.grace > 0:
            found.append(self.dead_since + self.grace)
        return min(found) if found else None


def _why(watch: Watch, now: float) -> str:
    deadline = watch.deadline()
    dead_for = now - (watch.dead_since or now)
    if deadline is not None and now >= deadline:
        return f"its owner (pid {watch.owner[0]}) is dead and its duration is over"
    return f"its owner (pid {watch.owner[0]}) has been dead for {dead_for:.0f} s (grace)"


def _try_undo(watch: Watch, now: float) -> bool:
    """Undo the entry; True when the watchdog is done (undone by it or by someone else)."""
    assert watch.entry is not None  # noqa: S101 - only called once the entry was read
    by = f"watchdog pid {os.getpid()}: {_why(watch, now)}"
    try:
        outcome = undo(watch.entry, Ledger.existing(watch.path), by=by)
    except LedgerError as exc:  # the ledger is gone or broken: the fault still goes
        _say(f"the ledger cannot be opened ({exc}): undoing from the entry as last read")
        outcome = undo_unrecorded(watch.entry, exc, by=by)
    if not outcome.undone_here:
        _say(f"found the entry closed by someone else, not undone here: {outcome.note}")
        return True
    if outcome.ok or outcome.unrecorded:  # the fault is gone (the ledger may not say so)
        _say(f"undone: {outcome.note}")
        return True
    watch.attempts += 1
    _say(f"undo attempt {watch.attempts} of {UNDO_ATTEMPTS} failed: {outcome.note}")
    watch.next_try = now + RETRY_S
    return watch.attempts >= UNDO_ATTEMPTS


def _owner_of(watch: Watch) -> tuple[int, int | None]:
    if watch.entry is not None:
        return watch.entry.owner_pid, watch.entry.owner_start
    return watch.owner


def _owner_died(watch: Watch, now: float) -> bool:
    """The owner was just seen dead: False when there is no entry to watch at all."""
    watch.dead_since = now
    _say(f"owner pid {watch.owner[0]} is dead")
    if watch.entry is None:
        watch.read_at = 0.0
        watch.refresh(now)  # a last look: it records nothing more once dead
        if watch.entry is None:
            _say("its entry was never recorded: nothing to watch")
            return False
    with contextlib.suppress(Exception):  # ready to undo at once when it is due
        importlib.import_module(watch.entry.module)
    return True


def _never_appeared(watch: Watch, now: float) -> bool:
    if now - watch.started <= APPEAR_S:
        return False
    _say(f"the entry never appeared in {watch.path}: exiting")
    return True


def step(watch: Watch, now: float) -> bool:
    """One look; True when the watchdog should exit."""
    watch.refresh(now)
    entry = watch.entry
    if entry is not None and entry.state == "closed":
        _say(f"entry closed ({entry.note}): nothing to do")
        return True
    watch.owner = _owner_of(watch)
    if _owner_alive(*watch.owner):
        watch.dead_since = None  # alive (running or stopped): never touched
        return entry is None and _never_appeared(watch, now)
    if watch.dead_since is None and not _owner_died(watch, now):
        return True
    due = watch.due()
    if due is None:
        _say("the owner is dead, no deadline and the grace is off: left for `gameday rollback`")
        return True
    if now < due or now < watch.next_try:
        return False
    return _try_undo(watch, now)


def main(settings: dict[str, Any]) -> int:
    watch = Watch(
        path=Path(settings["ledger"]),
        entry_id=str(settings["entry"]),
        owner=(int(settings["owner_pid"]), settings.get("owner_start")),
        grace=float(settings["grace_seconds"]),
        started=time.time(),
    )
    _say(f"watching entry {watch.entry_id} of {watch.path}, grace {watch.grace:g} s")
    while not step(watch, time.time()):
        time.sleep(POLL_S)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
