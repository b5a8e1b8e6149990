"""What this process keeps beside the ledger: its run id, what it recorded, who listens.

* the run id new entries get (:func:`set_current_run_id`: the gameday runner's,
  else one per process);
* the entries this process recorded (:func:`recorded_here`), undoable even if
  the ledger's file breaks afterwards;
* :data:`LISTENERS`, told about each entry this process writes or closes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from chaos_ext._core.ledger.entry import Entry, process_start_time

__all__ = [
    "LISTENERS",
    "Listener",
    "Listeners",
    "current_run_id",
    "recorded_here",
    "remember",
    "set_current_run_id",
]

Listener = Callable[[str, Entry], None]
"""Called with ``"open"`` or ``"closed"`` and the entry."""


class Listeners:
    """Who is told about each entry this process writes or closes; thread safe.

    A listener that raises is logged and ignored: it never stops a fault from
    being recorded or undone. One instance: :data:`LISTENERS`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []

    def add(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove(self, listener: Listener) -> None:
        """Stop telling ``listener`` (nothing if it was not listening)."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._listeners)

    def notify(self, event: str, entry: Entry) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(event, entry)
            except Exception:  # an observer never breaks the ledger
                logging.getLogger("chaostoolkit").exception("fault ledger listener failed")


LISTENERS = Listeners()
"""The listeners of this process's ledger writes (the runner publishes fault windows)."""

_lock = threading.Lock()
_current_run: str | None = None
_recorded: list[Entry] = []  # what this process recorded: undoable even if the file breaks


def set_current_run_id(run_id: str | None) -> None:
    """Set the run id recorded in new entries (the gameday runner does this)."""
    global _current_run  # noqa: PLW0603 - one run per process, read from activity threads
    with _lock:
        _current_run = run_id


def current_run_id() -> str:
    """The run id new entries get: the runner's, else one per process."""
    with _lock:
        if _current_run:
            return _current_run
    return f"pid-{os.getpid()}-{process_start_time(os.getpid())}"


def remember(entry: Entry) -> None:
    """Keep ``entry`` as this process recorded it."""
    with _lock:
        _recorded.append(entry)


def recorded_here(run_id: str) -> list[Entry]:
    """Entries this process recorded for ``run_id`` (as recorded; state not tracked)."""
    with _lock:
        return [e for e in _recorded if e.run_id == run_id]
