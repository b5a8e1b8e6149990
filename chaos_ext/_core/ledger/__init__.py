"""The fault ledger: every fault is written down before it is injected.

An action calls :func:`record` (or the :func:`fault` context manager) *before*
it changes anything. The entry holds the fault kind, its target, a JSON recipe
for undoing it, the identity of the system the fault lives in, the run id, the
owner's pid and process start time, and when it was written.

It is kept three times over: an SQLite database
(WAL, ``synchronous=FULL``), an append-only event log beside it (written and
fsync'd first) and a marker in another folder. Every operation checks that they
agree; a ledger that is damaged, emptied, truncated or deleted raises
:class:`~chaos_ext.errors.LedgerInconsistent` listing what may still be
injected, instead of answering "nothing open".

Each fault kind is declared once, as a :class:`FaultKind` in its domain's
``kinds.py`` (``FAULT_KINDS.declare(...)``, see :mod:`.kinds`), with its undo::

    def undo_netem(entry: Entry) -> str: ...

The undo must be idempotent: undoing a fault that is already gone returns
normally (and says so). :func:`undo` imports the module named in the entry,
checks the entry was recorded on this machine when the fault lives here,
runs its kind's undo and closes the entry; a handler that raises leaves the entry
open with the error recorded, for ``gameday rollback`` to retry.

Location: ``gameday --ledger PATH`` (the command's
:class:`~chaos_ext._core.settings.Settings`), else ``$GAMEDAY_LEDGER`` if set, else
``$XDG_STATE_HOME/gameday/ledger.sqlite3`` (default ``~/.local/state/gameday/ledger.sqlite3``).

How it is kept (the modules of this package):

* :mod:`.file` - the :class:`Ledger` (one file's entries), where the default one lives;
* :mod:`.entry` - one entry, and whether its owner process still runs;
* :mod:`.kinds` - one fault kind as one declared object (:class:`FaultKind`);
* :mod:`.handlers` - the declared kinds (:data:`FAULT_KINDS`), one entry's undo;
* :mod:`.events` - the append-only event log beside the database;
* :mod:`.store` - the SQLite database;
* :mod:`.marker` - the marker kept outside the ledger's folder;
* :mod:`.machine` - which machine (and boot) an entry was recorded on;
* :mod:`.process` - this process's run id, what it recorded, its listeners;
* :mod:`.check` - the full check that reconciles all three, and the repair;
* :mod:`.book` - the three parts read and written in step, under one lock;
* :mod:`.census` - every ledger on this machine; :mod:`.claim` - one undo of an entry at a time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chaos_ext._core import watchdog as _watchdog
from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.ledger import check
from chaos_ext._core.ledger.census import Census, census
from chaos_ext._core.ledger.claim import claimed
from chaos_ext._core.ledger.entry import Entry, process_start_time
from chaos_ext._core.ledger.file import Ledger, ledger_path, machine_scope, new_entry_id
from chaos_ext._core.ledger.handlers import (
    FAULT_KINDS,
    FaultKinds,
    UndoOutcome,
    undo_claimed,
    undo_unrecorded,
)
from chaos_ext._core.ledger.kinds import CLUSTER, DATABASE, LOCAL, FaultKind, Scan, UndoHandler
from chaos_ext._core.ledger.leftover import Adoption, Leftover
from chaos_ext._core.ledger.process import (
    LISTENERS,
    Listener,
    current_run_id,
    recorded_here,
    set_current_run_id,
)
from chaos_ext.errors import LedgerError

__all__ = [
    "CLUSTER",
    "DATABASE",
    "FAULT_KINDS",
    "LOCAL",
    "Adoption",
    "Census",
    "Entry",
    "FaultKind",
    "FaultKinds",
    "Ledger",
    "Leftover",
    "Scan",
    "UndoHandler",
    "UndoOutcome",
    "add_listener",
    "current_run_id",
    "default_ledger",
    "fault",
    "in_scope",
    "ledger_path",
    "machine_scope",
    "new_entry_id",
    "open_entries_on_machine",
    "parse_watchdog_grace",
    "process_start_time",
    "record",
    "recorded_here",
    "remove_listener",
    "repair",
    "set_current_run_id",
    "set_deadline",
    "set_watchdog_grace",
    "undo",
    "undo_after",
    "undo_handler",
    "undo_unrecorded",
    "verify",
]


def add_listener(listener: Listener) -> None:
    """Call ``listener("open" | "closed", entry)`` after each entry this process writes
    or closes (the runner publishes fault windows this way). A listener that raises is
    logged and ignored: it never stops a fault from being recorded or undone."""
    LISTENERS.add(listener)


def remove_listener(listener: Listener) -> None:
    LISTENERS.remove(listener)


def parse_watchdog_grace(value: Any, where: str = "watchdog_grace_seconds") -> float:
    """A dead-man grace in seconds, 0..86400 (0: off); InvalidArgument quoting ``value``."""
    return _watchdog.parse_grace(value, where)


def set_watchdog_grace(seconds: float | None) -> None:
    """The dead-man grace of faults recorded from now on (None: ``$GAMEDAY_WATCHDOG_GRACE``
    or the default; 0: off). See :mod:`chaos_ext._core.watchdog`."""
    _watchdog.set_grace(seconds)


def undo_handler(kind: str) -> Callable[[UndoHandler], UndoHandler]:
    """Declare a kind with only its idempotent undo (tests' own kinds; the package's
    kinds are whole :class:`FaultKind` declarations)."""
    return FAULT_KINDS.register(kind)


def verify(path: Path | None = None, *, full: bool = False) -> check.Verdict:
    """The full check of the ledger at ``path`` (default: :func:`ledger_path`), even broken."""
    return check.verify(path or ledger_path(), full=full)


def repair(path: Path | None = None, *, accept_loss: bool = False) -> list[str]:
    """Rebuild a damaged ledger from its intact part (see :mod:`chaos_ext._core.ledger.check`)."""
    return check.repair(path or ledger_path(), accept_loss=accept_loss)


def default_ledger() -> Ledger:
    """The ledger at :func:`ledger_path`."""
    return Ledger(ledger_path())


def record(
    *,
    kind: str,
    target: str,
    recipe: dict[str, Any],
    module: str,
    identity: dict[str, Any] | None = None,
    entry_id: str | None = None,
) -> Entry:
    """Record a fault in the default ledger before injecting it."""
    return default_ledger().record(
        kind=kind,
        target=target,
        recipe=recipe,
        module=module,
        identity=identity,
        entry_id=entry_id,
    )


def open_entries_on_machine(kinds: Sequence[str] = ()) -> Census:
    """Open entries of ``kinds`` in every ledger of this machine (see ``_ledger.census``)."""
    return census(ledger_path(), kinds)


def in_scope(entries: Sequence[Entry], *, include_dead_runs: bool = False) -> list[Entry]:
    """The entries a rollback activity may undo: this run's, plus dead runs' if asked.

    Another run's entry whose runner is alive is never included: that run is
    still using its fault and will undo it itself.
    """
    run = current_run_id()
    return [e for e in entries if e.run_id == run or (include_dead_runs and not e.owner_alive())]


def undo(entry: Entry, ledger: Ledger | None = None, *, by: str = "") -> UndoOutcome:
    """Undo one entry and close it; on failure keep it open with the error.

    Never raises for a failing handler: the outcome says what happened. One
    undo of an entry runs at a time (:mod:`chaos_ext._core.ledger.claim`): a
    second one waits, finds it closed and says who did it (``undone_here``
    False). If the ledger itself cannot be read or written, the fault is
    still undone from ``entry`` as given, and the outcome fails: the ledger
    must be repaired (``gameday ledger --repair``) to show it closed. ``by``
    names who undoes it in the note the entry is closed with (a watchdog).
    """
    try:
        book = ledger or default_ledger()
        with claimed(book.path, entry.id):
            return undo_claimed(entry, book, by)
    except LedgerError as exc:
        return undo_unrecorded(entry, exc, by=by)
    except OSError as exc:  # the claim's lock file
        return undo_unrecorded(entry, LedgerError(f"cannot claim the undo: {exc}"), by=by)


@contextmanager
def fault(
    *,
    kind: str,
    target: str,
    recipe: dict[str, Any],
    module: str,
    identity: dict[str, Any] | None = None,
    entry_id: str | None = None,
) -> Iterator[Entry]:
    """Record a fault, then inject it in the ``with`` body.

    If the body raises (a partial injection, or a signal), the fault is undone
    at once and the error propagates; otherwise the entry stays open until its
    undo. The recipe must be complete when recorded: the body may be killed
    at any point. Its watchdog (:mod:`chaos_ext._core.watchdog`) is started first
    and recorded in the entry: if this process dies, it undoes the fault at
    its deadline (:func:`undo_after`) or after the grace period.
    """
    book = default_ledger()
    entry_id = entry_id or new_entry_id()
    watchdog = _watchdog.start_watchdog(ledger=book.path, entry_id=entry_id, owner_pid=os.getpid())
    try:
        entry = book.record(
            kind=kind,
            target=target,
            recipe=recipe,
            module=module,
            identity=identity,
            entry_id=entry_id,
            watchdog=watchdog,
        )
    except BaseException:
        _watchdog.stop_watchdog(watchdog)
        raise
    try:
        failpoint(f"{kind}.after-entry")
        yield entry
    except BaseException:
        undo(entry, book)
        raise
    failpoint(f"{kind}.after-apply")


def undo_after(entry: Entry, seconds: float) -> threading.Timer:
    """Undo ``entry`` after ``seconds`` in this process (a fault's duration).

    The entry stays in the ledger meanwhile, so a dead process's fault is
    still found by ``gameday rollback``; the deadline is recorded in its
    watchdog first, which ends the fault then if this process has died. The
    timer closes the entry in the ledger it was recorded in (not the default
    of the moment it fires); if that ledger cannot be read then, the fault is
    undone from ``entry`` anyway and the error logged: it never outlives its
    deadline because its record was damaged.
    """
    set_deadline(entry, seconds)
    path = ledger_path()  # the ledger it was recorded in, whatever the default is by then

    def fire() -> None:
        try:
            book = Ledger(path)
            latest = book.get(entry.id)
        except LedgerError as exc:  # the fault still ends at its deadline; the ledger says why not
            outcome = undo_unrecorded(entry, exc, by="timer")
            logging.getLogger("chaostoolkit").error(
                "fault %s (%s) at its deadline: %s", entry.id, entry.kind, outcome.note
            )
            return
        if latest is not None and latest.state == "open":
            undo(latest, book)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def set_deadline(entry: Entry, seconds: float) -> None:
    """Record that ``entry``'s fault ends ``seconds`` from now, for its watchdog.

    For a fault that ends by itself (a helper's own time cap) and has no timer
    here: if this process dies, the watchdog closes the entry then (undoing
    whatever is left). A ledger that cannot be written only loses this: the
    watchdog then waits for the grace period.
    """
    try:
        book = default_ledger()
        latest = book.get(entry.id) or entry
        info = dict(latest.watchdog or {})
        if not info:
            return  # recorded without a watchdog (an older entry, or record() called directly)
        info["deadline"] = time.time() + float(seconds)
        book.set_watchdog(entry.id, info)
    except LedgerError as exc:
        logging.getLogger("chaostoolkit").warning("cannot record the fault's deadline: %s", exc)
